// Duplicate member names are refused at the protocol edge (security issue 14, item 3): one message
// must not mean one tool to a validator and another to the handler.
#include <doctest/doctest.h>

#include <string>

#include "protocol/errors.h"
#include "protocol/json_duplicates.h"
#include "protocol/jsonrpc.h"

using namespace kiln::protocol;

namespace {

json invalid_reply(std::string_view payload) {
  const Message m = classify(payload);
  REQUIRE(std::holds_alternative<Invalid>(m));
  return std::get<Invalid>(m).reply;
}

std::string message_of(const json& r) { return r.at("error").at("message").get<std::string>(); }

}  // namespace

TEST_CASE("a repeated tool name is refused, not resolved to the last one") {
  auto r = invalid_reply(
      R"({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"file_read","name":"sandbox_exec","arguments":{}}})");
  CHECK(r.at("error").at("code") == kInvalidRequest);
  CHECK(r.at("id") == 3);  // the id itself was not repeated, so the client can match the reply
  CHECK(message_of(r).find("\"name\"") != std::string::npos);
  CHECK(message_of(r).find("/params") != std::string::npos);
}

TEST_CASE("duplicates are found at every depth and in every message kind") {
  for (const char* payload : {
           R"({"jsonrpc":"2.0","jsonrpc":"2.0","id":1,"method":"ping"})",
           R"({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"a":{"b":1,"b":2}}}})",
           R"({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{"list":[{"k":1},{"k":1,"k":2}]}}})",
           R"({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"requestId":2}})",
           R"({"jsonrpc":"2.0","id":0,"result":{"roots":[],"roots":[{"uri":"file:///"}]}})",
       }) {
    CAPTURE(payload);
    auto r = invalid_reply(payload);
    CHECK(r.at("error").at("code") == kInvalidRequest);
  }
}

TEST_CASE("a repeated id is not echoed") {
  auto r = invalid_reply(R"({"jsonrpc":"2.0","id":1,"id":2,"method":"ping"})");
  CHECK(r.at("id").is_null());
}

TEST_CASE("the same key in different objects is fine") {
  const Message m = classify(
      R"({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{"name":"a","o":{"name":"b"},"l":[{"name":1},{"name":2}]}}})");
  CHECK(std::holds_alternative<Request>(m));
}

TEST_CASE("parse_noting_duplicates names the key and where it is") {
  std::optional<DuplicateKey> d;
  auto j = parse_noting_duplicates(R"({"a":[0,{"x/y":{"k":1,"k":2}}]})", d);
  REQUIRE(d);
  CHECK(d->key == "k");
  CHECK(d->pointer == "/a/1/x~1y");
  CHECK(j["a"][1]["x/y"]["k"] == 2);  // the value is still parsed (nlohmann keeps the last)
  parse_noting_duplicates(R"({"a":1,"b":{"a":2}})", d);
  CHECK_FALSE(d);
}

TEST_CASE("a huge repeated key is quoted by its start only") {
  std::string key(3 << 20, 'k');
  auto r = invalid_reply(R"({"jsonrpc":"2.0","id":1,"method":"x","params":{")" + key + R"(":1,")" + key + R"(":2}})");
  CHECK(message_of(r).size() < 4096);
}
