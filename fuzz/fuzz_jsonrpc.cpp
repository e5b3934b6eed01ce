// Fuzzes JSON-RPC classification (protocol/jsonrpc.*): any payload becomes exactly one kind of
// message, never throws, and an Invalid carries a well-formed error reply.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "protocol/jsonrpc.h"

using namespace kiln::protocol;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view payload(reinterpret_cast<const char*>(data), size);
  Message m = classify(payload);
  if (auto* inv = std::get_if<Invalid>(&m)) {
    const json& r = inv->reply;
    if (!r.is_object() || r.value("jsonrpc", "") != "2.0" || !r.contains("error") || !r["error"]["code"].is_number_integer() ||
        !r["error"]["message"].is_string())
      std::abort();
    const json& id = r["id"];
    if (!(id.is_null() || id.is_string() || id.is_number_integer())) std::abort();
  } else if (auto* req = std::get_if<Request>(&m)) {
    if (!(req->id.is_string() || req->id.is_number_integer())) std::abort();
    if (!(req->params.is_null() || req->params.is_object())) std::abort();
  } else if (auto* n = std::get_if<Notification>(&m)) {
    if (!(n->params.is_null() || n->params.is_object())) std::abort();
  } else if (auto* resp = std::get_if<Response>(&m)) {
    if (resp->result.has_value() == resp->error.has_value()) std::abort();
  }
  // What the session would send back must serialise to one NDJSON line that parses again.
  std::visit(
      [](auto&& v) {
        using T = std::decay_t<decltype(v)>;
        json out;
        if constexpr (std::is_same_v<T, Invalid>) out = v.reply;
        else if constexpr (std::is_same_v<T, Request>) out = make_response(v.id, v.params);
        else if constexpr (std::is_same_v<T, Notification>) out = make_notification(v.method, v.params);
        else out = make_error(v.id, -32603, "echo", v.error);
        std::string text = serialize(out);
        if (text.empty() || text.find('\n') != std::string::npos) std::abort();
        if (!std::holds_alternative<Request>(classify(text)) && !json::accept(text)) std::abort();
      },
      m);
  return 0;
}
