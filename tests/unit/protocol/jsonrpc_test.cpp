// Every classification rule of the JSON-RPC envelope, and the builders' exact wire shape.
#include <doctest/doctest.h>

#include <string>

#include "protocol/errors.h"
#include "protocol/jsonrpc.h"

using namespace kiln::protocol;

namespace {

// The error reply for an Invalid payload; fails the test if the payload classified otherwise.
json reply_of(std::string_view payload) {
  const Message m = classify(payload);
  REQUIRE(std::holds_alternative<Invalid>(m));
  const json& r = std::get<Invalid>(m).reply;
  CHECK(r.at("jsonrpc") == "2.0");
  CHECK(r.contains("id"));
  CHECK_FALSE(r.contains("result"));
  return r;
}

int code_of(const json& reply) { return reply.at("error").at("code").get<int>(); }
std::string message_of(const json& reply) { return reply.at("error").at("message").get<std::string>(); }
bool mentions(const json& reply, std::string_view text) {
  return message_of(reply).find(text) != std::string::npos;
}

}  // namespace

TEST_CASE("request: string and integer ids, params object or absent") {
  {
    const Message m = classify(R"({"jsonrpc":"2.0","id":7,"method":"tools/list","params":{"cursor":"c"}})");
    REQUIRE(std::holds_alternative<Request>(m));
    const auto& r = std::get<Request>(m);
    CHECK(r.id == 7);
    CHECK(r.method == "tools/list");
    CHECK(r.params == json{{"cursor", "c"}});
  }
  {
    const Message m = classify(R"({"jsonrpc":"2.0","id":"abc","method":"ping"})");
    REQUIRE(std::holds_alternative<Request>(m));
    CHECK(std::get<Request>(m).id == "abc");
    CHECK(std::get<Request>(m).params.is_null());
  }
  {  // id 0 is a perfectly good id (the TS SDK starts there) and negative ids are integers too
    CHECK(std::holds_alternative<Request>(classify(R"({"jsonrpc":"2.0","id":0,"method":"ping"})")));
    CHECK(std::holds_alternative<Request>(classify(R"({"jsonrpc":"2.0","id":-5,"method":"ping"})")));
  }
}

TEST_CASE("notification: no id") {
  const Message m = classify(R"({"jsonrpc":"2.0","method":"notifications/initialized"})");
  REQUIRE(std::holds_alternative<Notification>(m));
  CHECK(std::get<Notification>(m).method == "notifications/initialized");
  CHECK(std::get<Notification>(m).params.is_null());

  const Message c =
      classify(R"({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}})");
  REQUIRE(std::holds_alternative<Notification>(c));
  CHECK(std::get<Notification>(c).params.at("requestId") == 3);
}

TEST_CASE("response: result, error, and error with null id") {
  {
    const Message m = classify(R"({"jsonrpc":"2.0","id":0,"result":{"roots":[]}})");
    REQUIRE(std::holds_alternative<Response>(m));
    const auto& r = std::get<Response>(m);
    CHECK(r.id == 0);
    REQUIRE(r.result.has_value());
    CHECK(r.result->at("roots").is_array());
    CHECK_FALSE(r.error.has_value());
  }
  {
    const Message m =
        classify(R"({"jsonrpc":"2.0","id":"s1","error":{"code":-32601,"message":"no roots"}})");
    REQUIRE(std::holds_alternative<Response>(m));
    const auto& r = std::get<Response>(m);
    CHECK_FALSE(r.result.has_value());
    REQUIRE(r.error.has_value());
    CHECK(r.error->at("code") == -32601);
  }
  {  // the peer could not read our request: error reply with id null is still a response
    const Message m = classify(R"({"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}})");
    REQUIRE(std::holds_alternative<Response>(m));
    CHECK(std::get<Response>(m).id.is_null());
  }
}

TEST_CASE("malformed responses") {
  {
    const json r = reply_of(R"({"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"m"}})");
    CHECK(code_of(r) == kInvalidRequest);
    CHECK(r.at("id") == 1);
    CHECK(mentions(r, "both 'result' and 'error'"));
  }
  {
    const json r = reply_of(R"({"jsonrpc":"2.0","id":1,"error":"bad"})");
    CHECK(code_of(r) == kInvalidRequest);
    CHECK(mentions(r, "integer 'code'"));
  }
  {
    const json r = reply_of(R"({"jsonrpc":"2.0","id":1,"error":{"code":"x","message":"m"}})");
    CHECK(code_of(r) == kInvalidRequest);
  }
  {  // a result with null id is not a readable response
    const json r = reply_of(R"({"jsonrpc":"2.0","id":null,"result":{}})");
    CHECK(code_of(r) == kInvalidRequest);
    CHECK(r.at("id").is_null());
  }
  {
    const json r = reply_of(R"({"jsonrpc":"2.0","result":{}})");
    CHECK(mentions(r, "needs an 'id'"));
  }
}

TEST_CASE("parse errors: invalid JSON, invalid UTF-8, empty, excessive nesting -> -32700 id null") {
  for (std::string_view bad : {std::string_view(R"({"jsonrpc":"2.0","id":1,"method":)"),
                               std::string_view("not json"), std::string_view(""),
                               std::string_view("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"p\xff\"}"),
                               std::string_view("{\"a\":\"\xc3\"}")}) {
    CAPTURE(bad);
    const json r = reply_of(bad);
    CHECK(code_of(r) == kParseError);
    CHECK(r.at("id").is_null());
    CHECK(message_of(r).starts_with("Parse error: "));
    CHECK_FALSE(mentions(r, "[json.exception"));
  }
  const std::string deep = std::string(300, '[') + std::string(300, ']');
  const json r = reply_of(deep);
  CHECK(code_of(r) == kParseError);
  CHECK(mentions(r, "nested deeper than 256"));
  // brackets inside strings are not nesting
  const std::string in_string =
      R"({"jsonrpc":"2.0","id":1,"method":"m","params":{"s":")" + std::string(1000, '[') + "\\\"\"}}";
  CHECK(std::holds_alternative<Request>(classify(in_string)));
}

TEST_CASE("parse error text is bounded even for a huge bad token") {
  const std::string huge = "\"" + std::string(100000, 'a');  // unterminated string
  const json r = reply_of(huge);
  CHECK(message_of(r).size() < 400);
}

TEST_CASE("batch arrays are refused with -32600 id null") {
  const json r = reply_of(R"([{"jsonrpc":"2.0","id":1,"method":"ping"}])");
  CHECK(code_of(r) == kInvalidRequest);
  CHECK(r.at("id").is_null());
  CHECK(mentions(r, "batch"));
  CHECK(code_of(reply_of("[]")) == kInvalidRequest);
}

TEST_CASE("non-object messages") {
  for (std::string_view s : {"42", "\"ping\"", "null", "true"}) {
    CAPTURE(s);
    const json r = reply_of(s);
    CHECK(code_of(r) == kInvalidRequest);
    CHECK(r.at("id").is_null());
    CHECK(mentions(r, "must be a JSON object"));
  }
}

TEST_CASE("jsonrpc member missing or wrong; a readable id is echoed") {
  {
    const json r = reply_of(R"({"id":5,"method":"ping"})");
    CHECK(code_of(r) == kInvalidRequest);
    CHECK(r.at("id") == 5);
    CHECK(mentions(r, "'jsonrpc' is missing"));
  }
  for (std::string_view s : {R"({"jsonrpc":"1.0","id":"a","method":"ping"})",
                             R"({"jsonrpc":2.0,"id":"a","method":"ping"})",
                             R"({"jsonrpc":"2.0 ","id":"a","method":"ping"})"}) {
    CAPTURE(s);
    const json r = reply_of(s);
    CHECK(code_of(r) == kInvalidRequest);
    CHECK(r.at("id") == "a");
    CHECK(mentions(r, "exactly \"2.0\""));
  }
  {  // no readable id: null
    const json r = reply_of(R"({"jsonrpc":"1.0","id":1.5,"method":"ping"})");
    CHECK(r.at("id").is_null());
  }
}

TEST_CASE("id null and ids of the wrong type -> -32600 with id null") {
  {
    const json r = reply_of(R"({"jsonrpc":"2.0","id":null,"method":"ping"})");
    CHECK(code_of(r) == kInvalidRequest);
    CHECK(r.at("id").is_null());
    CHECK(mentions(r, "'id' must not be null"));
  }
  for (std::string_view s : {R"({"jsonrpc":"2.0","id":1.5,"method":"ping"})",
                             R"({"jsonrpc":"2.0","id":1.0,"method":"ping"})",
                             R"({"jsonrpc":"2.0","id":true,"method":"ping"})",
                             R"({"jsonrpc":"2.0","id":{"a":1},"method":"ping"})",
                             R"({"jsonrpc":"2.0","id":[1],"method":"ping"})"}) {
    CAPTURE(s);
    const json r = reply_of(s);
    CHECK(code_of(r) == kInvalidRequest);
    CHECK(r.at("id").is_null());
    CHECK(mentions(r, "'id' must be a string or an integer"));
  }
}

TEST_CASE("method missing or not a string") {
  {
    const json r = reply_of(R"({"jsonrpc":"2.0","id":9})");
    CHECK(code_of(r) == kInvalidRequest);
    CHECK(r.at("id") == 9);
    CHECK(mentions(r, "'method' is missing"));
  }
  {  // a bad notification still gets a reply, with id null
    const json r = reply_of(R"({"jsonrpc":"2.0"})");
    CHECK(r.at("id").is_null());
    CHECK(mentions(r, "'method' is missing"));
  }
  {
    const json r = reply_of(R"({"jsonrpc":"2.0","id":"q","method":42})");
    CHECK(code_of(r) == kInvalidRequest);
    CHECK(r.at("id") == "q");
    CHECK(message_of(r) == "Invalid Request: 'method' must be a string, got integer");
  }
}

TEST_CASE("params must be an object") {
  for (std::string_view s : {R"({"jsonrpc":"2.0","id":1,"method":"m","params":[1,2]})",
                             R"({"jsonrpc":"2.0","id":1,"method":"m","params":"x"})",
                             R"({"jsonrpc":"2.0","id":1,"method":"m","params":null})"}) {
    CAPTURE(s);
    const json r = reply_of(s);
    CHECK(code_of(r) == kInvalidRequest);
    CHECK(r.at("id") == 1);
    CHECK(mentions(r, "Invalid Request: 'params' must be an object"));
  }
  const json r = reply_of(R"({"jsonrpc":"2.0","method":"notifications/x","params":[]})");
  CHECK(r.at("id").is_null());
  CHECK(message_of(r) ==
        "Invalid Request: 'params' must be an object (MCP params are always objects), got array");
}

TEST_CASE("classify_value(json) agrees with classify(text)") {
  const json m = {{"jsonrpc", "2.0"}, {"id", 3}, {"method", "ping"}};
  CHECK(std::holds_alternative<Request>(classify_value(m)));
  CHECK(std::holds_alternative<Invalid>(classify_value(json::array())));
}

TEST_CASE("builders produce the exact wire shape") {
  CHECK(serialize(make_response(1, json::object())) == R"({"id":1,"jsonrpc":"2.0","result":{}})");
  CHECK(serialize(make_error("a", kMethodNotFound, "Method not found: x")) ==
        R"({"error":{"code":-32601,"message":"Method not found: x"},"id":"a","jsonrpc":"2.0"})");
  CHECK(make_error(nullptr, kResourceNotFound, "nope", json{{"uri", "file:///x"}}) ==
        json::parse(R"({"jsonrpc":"2.0","id":null,
                        "error":{"code":-32002,"message":"nope","data":{"uri":"file:///x"}}})"));
  CHECK(make_notification("notifications/initialized") ==
        json{{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}});
  CHECK(make_notification("notifications/progress", {{"progress", 1}}).at("params").at("progress") == 1);
  CHECK(make_request(0, "roots/list") == json{{"jsonrpc", "2.0"}, {"id", 0}, {"method", "roots/list"}});
  CHECK(make_request("r", "x", json::object()).at("params") == json::object());
}

TEST_CASE("builders round-trip through classify") {
  CHECK(std::holds_alternative<Request>(classify(serialize(make_request(4, "roots/list")))));
  CHECK(std::holds_alternative<Notification>(
      classify(serialize(make_notification("n", json::object())))));
  CHECK(std::holds_alternative<Response>(classify(serialize(make_response("x", {{"a", 1}})))));
  CHECK(std::holds_alternative<Response>(classify(serialize(make_error(nullptr, -32700, "p")))));
}

TEST_CASE("serialize: compact, no raw newline, invalid UTF-8 replaced instead of throwing") {
  const json v = {{"text", "line1\nline2\r\n"}, {"nested", {{"a", json::array({1, 2})}}}};
  const std::string s = serialize(v);
  CHECK(s.find('\n') == std::string::npos);
  CHECK(s.find('\r') == std::string::npos);
  CHECK(json::parse(s) == v);

  const json bad = {{"t", std::string("ok\xff\xfe")}};
  std::string out;
  CHECK_NOTHROW(out = serialize(bad));
  CHECK(out == "{\"t\":\"ok\xef\xbf\xbd\xef\xbf\xbd\"}");
}
