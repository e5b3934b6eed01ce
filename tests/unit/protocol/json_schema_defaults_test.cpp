// apply_defaults, which hands tool handlers their schema's defaults: what it fills in, what it
// leaves alone, and the start-up check that refuses a default its own schema would reject.
#include <doctest/doctest.h>

#include "protocol/json_schema.h"

using kiln::protocol::apply_defaults;
using kiln::protocol::unsupported_keyword;
using kiln::protocol::validate;
using nlohmann::json;

namespace {

json J(const char* text) { return json::parse(text); }

// The instance after validation and default filling, as tools_call does it.
json filled(const json& schema, json instance) {
  REQUIRE_FALSE(validate(schema, instance).has_value());
  apply_defaults(schema, instance);
  return instance;
}

const json kListing = J(R"({"type":"object","additionalProperties":false,"properties":{
    "path":{"type":"string","minLength":1,"default":"."},
    "depth":{"type":"integer","minimum":0,"default":1},
    "include_ignored":{"type":"boolean","default":false},
    "glob":{"type":"string"}}})");

}  // namespace

TEST_CASE("an absent property gets the schema's default; a present one keeps its value") {
  CHECK(filled(kListing, json::object()) == J(R"({"path":".","depth":1,"include_ignored":false})"));
  CHECK(filled(kListing, J(R"({"path":"src","depth":0})")) == J(R"({"path":"src","depth":0,"include_ignored":false})"));
  // Falsy and boundary values are present values too.
  CHECK(filled(kListing, J(R"({"include_ignored":true,"depth":64})"))["depth"] == 64);
  CHECK(filled(kListing, J(R"({"include_ignored":true})"))["include_ignored"] == true);
}

TEST_CASE("a property without a default stays absent") {
  const json out = filled(kListing, json::object());
  CHECK_FALSE(out.contains("glob"));
  CHECK(filled(J(R"({"type":"object","properties":{"a":{"type":"string"}}})"), json::object()) == json::object());
}

TEST_CASE("nested objects: defaults inside a present object, and inside a default just filled in") {
  const json s = J(R"({"type":"object","properties":{
      "limits":{"type":"object","properties":{"wall_s":{"type":"number","default":600},"pids":{"type":"integer"}}},
      "policy":{"type":"object","default":{},"properties":{"network":{"type":"string","default":"none"}}}}})");
  CHECK(filled(s, J(R"({"limits":{"pids":5}})")) ==
        J(R"({"limits":{"pids":5,"wall_s":600},"policy":{"network":"none"}})"));
  CHECK(filled(s, J(R"({"limits":{"wall_s":1.5},"policy":{"network":"host"}})")) ==
        J(R"({"limits":{"wall_s":1.5},"policy":{"network":"host"}})"));
  // An absent object without a default is not invented just to hold its members' defaults.
  CHECK_FALSE(filled(s, json::object()).contains("limits"));
}

TEST_CASE("arrays: never grown, shrunk or replaced; objects inside them get their defaults") {
  const json s = J(R"({"type":"object","properties":{
      "edits":{"type":"array","items":{"type":"object","properties":{
          "old_text":{"type":"string"},"replace_all":{"type":"boolean","default":false}}}},
      "tags":{"type":"array","items":{"type":"string","default":"x"},"default":["a","b"]}}})");
  CHECK(filled(s, J(R"({"edits":[{"old_text":"a"},{"old_text":"b","replace_all":true}]})")) ==
        J(R"({"edits":[{"old_text":"a","replace_all":false},{"old_text":"b","replace_all":true}],"tags":["a","b"]})"));
  // A present array is kept as given, even an empty one, and an item's default never adds items.
  CHECK(filled(s, J(R"({"edits":[],"tags":[]})")) == J(R"({"edits":[],"tags":[]})"));
  CHECK(filled(s, J(R"({"tags":["z"]})"))["tags"] == J(R"(["z"])"));
}

TEST_CASE("$ref, allOf, additionalProperties and the matching oneOf branch carry defaults") {
  const json s = J(R"({"$defs":{"check":{"type":"object","properties":{"on_failure":{"type":"string","default":"stop"}}}},
      "type":"object","properties":{
        "verify":{"type":"array","items":{"$ref":"#/$defs/check"}},
        "both":{"allOf":[{"properties":{"a":{"default":1}}},{"properties":{"b":{"default":2}}}]},
        "env":{"type":"object","additionalProperties":{"type":"object","properties":{"secret":{"default":false}}}},
        "command":{"oneOf":[{"type":"string"},
                            {"type":"object","required":["argv"],"properties":{"argv":{"type":"array"},"shell":{"default":false}}}]}}})");
  const json out = filled(s, J(R"({"verify":[{},{"on_failure":"continue"}],"both":{},"env":{"A":{},"B":{"secret":true}},
                                   "command":{"argv":["ls"]}})"));
  CHECK(out["verify"] == J(R"([{"on_failure":"stop"},{"on_failure":"continue"}])"));
  CHECK(out["both"] == J(R"({"a":1,"b":2})"));
  CHECK(out["env"] == J(R"({"A":{"secret":false},"B":{"secret":true}})"));
  CHECK(out["command"] == J(R"({"argv":["ls"],"shell":false})"));
  // The string branch matched: the object branch's defaults do not apply to it.
  CHECK(filled(s, J(R"({"command":"ls"})"))["command"] == "ls");
}

TEST_CASE("a $ref cycle that does not descend into the instance ends") {
  const json s = J(R"({"$ref":"#","properties":{"a":{"default":1}}})");
  json v = json::object();
  apply_defaults(s, v);
  CHECK(v == J(R"({"a":1})"));
}

TEST_CASE("validation still rejects bad values; a default is no excuse for a wrong one") {
  CHECK(validate(kListing, J(R"({"depth":-1})"))->message == "must be >= 0, got -1");
  CHECK(validate(kListing, J(R"({"path":""})"))->path == "/path");
  CHECK(validate(kListing, J(R"({"include_ignored":"yes"})"))->message == "expected boolean, got string");
  CHECK(validate(kListing, J(R"({"glob":null})")).has_value());
  CHECK(validate(kListing, J(R"({"depht":2})"))->message.starts_with("unexpected property 'depht'"));
}

TEST_CASE("the start-up check refuses a default the schema around it rejects") {
  CHECK_FALSE(unsupported_keyword(kListing).has_value());
  CHECK(unsupported_keyword(J(R"({"properties":{"limit":{"type":"integer","minimum":1,"default":0}}})")) ==
        "invalid 'default' at /properties/limit: the schema around it rejects it: must be >= 1, got 0");
  CHECK(unsupported_keyword(J(R"({"properties":{"s":{"enum":["a","b"],"default":"c"}}})")).value_or("").starts_with(
      "invalid 'default' at /properties/s"));
  // Through a $ref, and deep inside a default object.
  CHECK(unsupported_keyword(J(R"({"$defs":{"n":{"type":"integer"}},"properties":{"n":{"$ref":"#/$defs/n","default":"1"}}})"))
            .has_value());
  CHECK(unsupported_keyword(J(R"({"properties":{"o":{"type":"object","properties":{"x":{"type":"string"}},"default":{"x":1}}}})")) ==
        "invalid 'default' at /properties/o: the schema around it rejects it: at /x: expected string, got integer");
}
