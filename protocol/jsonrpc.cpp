// Envelope classification and construction. This is the nlohmann edge of the protocol layer: parse
// and dump exceptions are caught here and turned into JSON-RPC errors or safe output.
#include "protocol/jsonrpc.h"

#include <string>
#include <utility>

#include "core/quote.h"
#include "protocol/errors.h"
#include "protocol/json_duplicates.h"
#include "protocol/json_type.h"

namespace kiln::protocol {

namespace {

Invalid invalid(const json& id, int code, std::string message) {
  return Invalid{make_error(id, code, message)};
}

Invalid invalid_request(const json& id, std::string what) {
  return invalid(id, kInvalidRequest, "Invalid Request: " + std::move(what));
}

std::string got(const json& v) { return "got " + std::string(json_type_name(v)); }

bool valid_id(const json& id) { return id.is_string() || id.is_number_integer(); }

// Cheap pre-scan so hostile nesting is refused before any recursive code sees it. It only needs
// to be right for well-formed JSON; malformed input is rejected by the parser anyway.
bool nesting_within_limit(std::string_view text) {
  int depth = 0;
  bool in_string = false;
  bool escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth) return false;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return true;
}

Message classify_response(const json& m, const json& echo_id) {
  const auto id = m.find("id");
  const bool has_error = m.contains("error");
  const bool id_ok = id != m.end() && (valid_id(*id) || (id->is_null() && has_error));
  if (!id_ok) {
    return invalid_request(nullptr, id == m.end()
                                        ? "a response needs an 'id'"
                                        : "a response 'id' must be a string or an integer, " + got(*id));
  }
  if (has_error && m.contains("result")) {
    return invalid_request(echo_id, "a response must not carry both 'result' and 'error'");
  }
  Response r;
  r.id = *id;
  if (has_error) {
    const json& e = m.at("error");
    const auto code = e.is_object() ? e.find("code") : e.end();
    const auto msg = e.is_object() ? e.find("message") : e.end();
    if (!e.is_object() || code == e.end() || !code->is_number_integer() || msg == e.end() ||
        !msg->is_string()) {
      return invalid_request(echo_id,
                             "'error' must be an object with an integer 'code' and a string 'message'");
    }
    r.error = e;
  } else {
    r.result = m.at("result");
  }
  return r;
}

}  // namespace

Message classify(std::string_view payload) {
  if (!nesting_within_limit(payload)) {
    return invalid(nullptr, kParseError,
                   "Parse error: JSON nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
  }
  json parsed;
  std::optional<DuplicateKey> duplicate;
  try {
    parsed = parse_noting_duplicates(payload, duplicate);
  } catch (const json::exception& e) {
    // nlohmann's text names the position and the offending token, which is what a client needs;
    // its "[json.exception...] " tag is noise and its token echo can be megabytes long.
    std::string_view what = e.what();
    if (const auto tag_end = what.find("] "); what.starts_with("[json.") && tag_end != what.npos) {
      what.remove_prefix(tag_end + 2);
    }
    std::string text = "Parse error: " + std::string(what.substr(0, 300));
    if (what.size() > 300) text += "...";
    return invalid(nullptr, kParseError, std::move(text));
  }
  if (duplicate) {
    // Well-formed JSON (RFC 8259 only says names SHOULD be unique), but not a usable request:
    // which of the two values counts is exactly what must not be guessed. The id is echoed only
    // when it is not itself the repeated member.
    json echo_id = nullptr;
    if (!(duplicate->pointer.empty() && duplicate->key == "id") && parsed.is_object()) {
      if (auto id = parsed.find("id"); id != parsed.end() && valid_id(*id)) echo_id = *id;
    }
    return invalid_request(echo_id, "duplicate key \"" + bounded(duplicate->key) + "\" in " +
                                        (duplicate->pointer.empty() ? std::string("the message")
                                                                    : "'" + bounded(duplicate->pointer) + "'") +
                                        "; each member name may appear once per object");
  }
  return classify_value(parsed);
}

Message classify_value(const json& m) {
  if (m.is_array()) {
    return invalid_request(nullptr,
                           "batch arrays are not supported (JSON-RPC batching was removed in MCP "
                           "2025-06-18); send each message on its own");
  }
  if (!m.is_object()) return invalid_request(nullptr, "a message must be a JSON object, " + got(m));

  const auto id = m.find("id");
  const json echo_id = (id != m.end() && valid_id(*id)) ? *id : json(nullptr);

  const auto version = m.find("jsonrpc");
  if (version == m.end()) return invalid_request(echo_id, "'jsonrpc' is missing (must be \"2.0\")");
  if (!version->is_string() || version->get_ref<const std::string&>() != "2.0") {
    return invalid_request(echo_id, "'jsonrpc' must be exactly \"2.0\", got " + version->dump());
  }

  const auto method = m.find("method");
  if (method == m.end() && (m.contains("result") || m.contains("error"))) {
    return classify_response(m, echo_id);
  }

  if (id != m.end()) {
    if (id->is_null()) {
      return invalid_request(nullptr, "'id' must not be null (omit 'id' to send a notification)");
    }
    if (!valid_id(*id)) return invalid_request(nullptr, "'id' must be a string or an integer, " + got(*id));
  }
  if (method == m.end()) return invalid_request(echo_id, "'method' is missing");
  if (!method->is_string()) return invalid_request(echo_id, "'method' must be a string, " + got(*method));

  json params = nullptr;
  if (const auto p = m.find("params"); p != m.end()) {
    if (!p->is_object()) {
      return invalid_request(echo_id, "'params' must be an object (MCP params are always objects), " +
                                          got(*p));
    }
    params = *p;
  }

  if (id == m.end()) return Notification{method->get<std::string>(), std::move(params)};
  return Request{*id, method->get<std::string>(), std::move(params)};
}

json make_response(const json& id, json result) {
  return json{{"jsonrpc", "2.0"}, {"id", id}, {"result", std::move(result)}};
}

json make_error(const json& id, int code, std::string_view message, std::optional<json> data) {
  // Every JSON-RPC error is built here: whatever a message quotes, it stays small.
  json error = {{"code", code}, {"message", bounded(message, kMessageBytes)}};
  if (data) error["data"] = std::move(*data);
  return json{{"jsonrpc", "2.0"}, {"id", id}, {"error", std::move(error)}};
}

json make_notification(std::string_view method, json params) {
  json m = {{"jsonrpc", "2.0"}, {"method", method}};
  if (!params.is_null()) m["params"] = std::move(params);
  return m;
}

json make_request(const json& id, std::string_view method, json params) {
  json m = {{"jsonrpc", "2.0"}, {"id", id}, {"method", method}};
  if (!params.is_null()) m["params"] = std::move(params);
  return m;
}

std::string serialize(const json& value) {
  try {
    return value.dump(-1, ' ', false, json::error_handler_t::replace);
  } catch (...) {
    return {};
  }
}

}  // namespace kiln::protocol
