// Fuzzes JSON-RPC dispatch through a whole MCP session (mcp/session.*): lifecycle, every method,
// tool calls, cancellation, replies to our own roots/list request. Each input line is one message
// to a fresh session on the harness server (fuzz_server_env.h: nothing can execute). Everything the
// session sends must be well-formed JSON-RPC, and every request gets exactly one reply.
#include <map>
#include <mutex>
#include <set>

#include "fuzz/fuzz_server_env.h"
#include "protocol/jsonrpc.h"
#include "mcp/methods.h"

using nlohmann::json;
using kiln::fuzz::violated;
namespace proto = kiln::protocol;
namespace srv = kiln::server;

namespace {

class Collector final : public srv::Outbound {
 public:
  void send(const json& message) override {
    std::string text = proto::serialize(message);
    auto m = proto::classify(text);
    if (std::holds_alternative<proto::Invalid>(m)) violated("the session sent an invalid message", text.substr(0, 1000));
    std::lock_guard lock(mu);
    if (auto* r = std::get_if<proto::Response>(&m)) {
      replies[r->id.dump()]++;
    } else if (auto* q = std::get_if<proto::Request>(&m)) {
      server_requests.push_back(q->id);
    }
  }
  std::mutex mu;
  std::map<std::string, int> replies;
  std::vector<json> server_requests;
};

// A client's roots answer may name any folder; the harness keeps them inside the scratch folder.
std::string confine_roots(const std::string& line, const kiln::fuzz::ServerEnv& env) {
  json m = json::parse(line, nullptr, false);
  if (m.is_discarded() || !m.is_object() || m.contains("method") || !m.contains("result")) return line;
  json& res = m["result"];
  if (!res.is_object() || !res.contains("roots") || !res["roots"].is_array()) return line;
  bool changed = false;
  for (auto& root : res["roots"]) {
    if (!root.is_object() || !root.contains("uri") || !root["uri"].is_string()) continue;
    std::string path = srv::path_from_file_uri(root["uri"].get<std::string>());
    if (path.empty() || kiln::fuzz::inside(kiln::fuzz::landing(path), env.scratch)) continue;
    root["uri"] = "file://" + env.ws_dir;
    changed = true;
  }
  return changed ? m.dump() : line;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto& env = kiln::fuzz::server_env();
  env.reset_workspace();
  auto out = std::make_shared<Collector>();
  std::map<std::string, int> requested;
  bool cancels = false;
  {
    srv::Session session(*env.ctx, out);
    std::string_view input(reinterpret_cast<const char*>(data), size);
    while (!input.empty()) {
      auto nl = input.find('\n');
      std::string line(input.substr(0, nl));
      input.remove_prefix(nl == std::string_view::npos ? input.size() : nl + 1);
      if (line.empty()) continue;
      line = confine_roots(line, env);
      auto m = proto::classify(line);
      if (auto* q = std::get_if<proto::Request>(&m)) requested[q->id.dump()]++;
      // A broken message whose id was readable is answered under that id too.
      if (auto* bad = std::get_if<proto::Invalid>(&m); bad && !bad->reply["id"].is_null()) requested[bad->reply["id"].dump()]++;
      if (auto* n = std::get_if<proto::Notification>(&m); n && n->method == "notifications/cancelled") cancels = true;
      session.handle_payload(line);
    }
    // Answer whatever the session asked and the input did not (roots/list), so no tool call waits
    // for a client that will never reply.
    std::vector<json> asked;
    {
      std::lock_guard lock(out->mu);
      asked = out->server_requests;
    }
    for (const auto& id : asked)
      session.handle_payload(proto::serialize(proto::make_error(id, -32601, "fuzz client: no roots")));
    const bool drained = session.shutdown(std::chrono::seconds(20), std::chrono::seconds(5));
    if (!drained) violated("requests still running 25 s after shutdown began");
    if (!cancels) {
      std::lock_guard lock(out->mu);
      for (const auto& [id, n] : requested) {
        int got = out->replies.count(id) ? out->replies[id] : 0;
        // A duplicate id while the first is in flight gets its own error reply, so n requests
        // with one id get between 1 and n replies; a unique id exactly one.
        if (got < 1 || got > n) violated("wrong number of replies", id + ": " + std::to_string(got) + " for " + std::to_string(n));
      }
    }
  }
  env.check_outside_untouched();
  return 0;
}
