// The JSON-RPC 2.0 envelope as MCP (2025-06-18 and later) constrains it: one payload becomes exactly
// one kind of message, and anything unusable becomes the error reply to send, decided here once.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include <nlohmann/json.hpp>

namespace kiln::protocol {

using json = nlohmann::json;

// Deeper JSON is refused before parsing: nothing legitimate nests this far and recursive consumers
// (dump, schema validation, destructors in old nlohmann) must not meet a 16 MiB "[[[[...".
inline constexpr int kMaxJsonDepth = 256;

struct Request {
  json id;  // string or integer, never null
  std::string method;
  json params;  // an object, or null when the message had no params
};

struct Notification {
  std::string method;
  json params;  // an object, or null when absent
};

// A reply to one of our own server->client requests (roots/list, sampling, elicitation, ping).
struct Response {
  json id;  // string or integer; null only for an error reply to something the peer could not read
  std::optional<json> result;
  std::optional<json> error;  // {code:int, message:string, data?}
};

// Not a usable message; `reply` is the complete error response to send back.
struct Invalid {
  json reply;
};

using Message = std::variant<Request, Notification, Response, Invalid>;

// Never throws. Parse errors (including invalid UTF-8 and excessive nesting) reply -32700 with id
// null; structural problems reply -32600 echoing the id when it was readable.
Message classify(std::string_view payload);
// For an already-parsed value (transports that hand over JSON). A distinct name because json
// converts implicitly from text and an overload would be ambiguous.
Message classify_value(const json& message);

json make_response(const json& id, json result);
json make_error(const json& id, int code, std::string_view message,
                std::optional<json> data = std::nullopt);
// params null means "no params member".
json make_notification(std::string_view method, json params = nullptr);
json make_request(const json& id, std::string_view method, json params = nullptr);

// Compact (never a raw newline, so safe for NDJSON), invalid UTF-8 replaced by U+FFFD. Does not
// throw; returns "" only if memory runs out, which a writer should treat as nothing to send.
std::string serialize(const json& value);

}  // namespace kiln::protocol
