// The schema validator keyword by keyword, the instance paths it reports, $ref resolution, the
// wording agents see, and the start-up check that refuses keywords we would not enforce.
#include <doctest/doctest.h>

#include <string>

#include "protocol/json_schema.h"

using kiln::protocol::SchemaViolation;
using kiln::protocol::unsupported_keyword;
using kiln::protocol::validate;
using nlohmann::json;

namespace {

json J(const char* text) { return json::parse(text); }

bool ok(const json& schema, const json& instance) { return !validate(schema, instance).has_value(); }

// "path|message" of the violation, or "ok".
std::string why(const json& schema, const json& instance) {
  const auto v = validate(schema, instance);
  return v ? v->path + "|" + v->message : "ok";
}

}  // namespace

TEST_CASE("type: single names, lists, integer accepts integral floats") {
  CHECK(ok(J(R"({"type":"string"})"), "x"));
  CHECK(why(J(R"({"type":"string"})"), 3) == "|expected string, got integer");
  CHECK(why(J(R"({"type":"integer"})"), "3") == "|expected integer, got string");
  CHECK(ok(J(R"({"type":"integer"})"), 3));
  CHECK(ok(J(R"({"type":"integer"})"), J("3.0")));
  CHECK(ok(J(R"({"type":"integer"})"), J("-7")));
  CHECK(why(J(R"({"type":"integer"})"), 3.5) == "|expected integer, got number");
  CHECK(ok(J(R"({"type":"number"})"), 3));
  CHECK(ok(J(R"({"type":"number"})"), 3.5));
  CHECK(why(J(R"({"type":"number"})"), true) == "|expected number, got boolean");
  CHECK(ok(J(R"({"type":"boolean"})"), false));
  CHECK(ok(J(R"({"type":"null"})"), nullptr));
  CHECK(why(J(R"({"type":"object"})"), json::array()) == "|expected object, got array");
  CHECK(why(J(R"({"type":"array"})"), json::object()) == "|expected array, got object");
  CHECK(ok(J(R"({"type":["string","null"]})"), nullptr));
  CHECK(why(J(R"({"type":["string","null"]})"), 1) == "|expected string or null, got integer");
}

TEST_CASE("boolean schemas and empty schema") {
  CHECK(ok(json(true), 42));
  CHECK(ok(json::object(), json::array({1, "x"})));
  CHECK(why(json(false), 42) == "|no value is allowed here");
}

TEST_CASE("enum and const") {
  const json e = J(R"({"enum":["text","base64"]})");
  CHECK(ok(e, "text"));
  CHECK(why(e, "utf8") == "|must be one of: text, base64");
  CHECK(why(J(R"({"enum":[1,null,"a"]})"), 2) == "|must be one of: 1, null, a");
  CHECK(ok(J(R"({"enum":[1,2]})"), J("2.0")));  // mathematically equal
  CHECK(ok(J(R"({"const":"x"})"), "x"));
  CHECK(why(J(R"({"const":"x"})"), "y") == "|must be \"x\"");
  CHECK(why(J(R"({"const":{"a":1}})"), J(R"({"a":2})")) == "|must be {\"a\":1}");
}

TEST_CASE("numeric bounds") {
  CHECK(ok(J(R"({"minimum":0})"), 0));
  CHECK(why(J(R"({"minimum":0})"), -1) == "|must be >= 0, got -1");
  CHECK(why(J(R"({"maximum":10})"), 10.5) == "|must be <= 10, got 10.5");
  CHECK(ok(J(R"({"maximum":10})"), 10));
  CHECK(why(J(R"({"exclusiveMinimum":0})"), 0) == "|must be > 0, got 0");
  CHECK(ok(J(R"({"exclusiveMinimum":0})"), 0.001));
  CHECK(why(J(R"({"exclusiveMaximum":1})"), 1) == "|must be < 1, got 1");
  CHECK(ok(J(R"({"exclusiveMaximum":1})"), 0.999));
  CHECK(ok(J(R"({"multipleOf":4})"), 12));
  CHECK(why(J(R"({"multipleOf":4})"), 13) == "|must be a multiple of 4, got 13");
  CHECK(ok(J(R"({"multipleOf":0.5})"), 2.5));
  // bounds only apply to numbers
  CHECK(ok(J(R"({"minimum":5})"), "abc"));
}

TEST_CASE("string length counts code points; pattern is unanchored ECMAScript") {
  const json s = J(R"({"minLength":2,"maxLength":3})");
  CHECK(why(s, "a") == "|must be at least 2 characters long, got 1");
  CHECK(ok(s, "\xc3\xa9\xc3\xa9\xc3\xa9"));  // 3 code points, 6 bytes
  CHECK(ok(s, "\xf0\x9f\x94\xa5\xf0\x9f\x94\xa5"));  // 2 emoji, 8 bytes
  CHECK(why(s, "abcd") == "|must be at most 3 characters long, got 4");
  CHECK(why(J(R"({"minLength":1})"), "") == "|must be at least 1 character long, got 0");
  CHECK(ok(J(R"({"pattern":"[0-9]+"})"), "abc123"));
  CHECK(why(J(R"({"pattern":"^[a-f0-9]{64}$"})"), "xyz") == "|must match the pattern ^[a-f0-9]{64}$");
  CHECK(ok(J(R"({"pattern":"^[a-f0-9]{4}$"})"), "beef"));
  CHECK(ok(J(R"({"pattern":"^x"})"), 5));  // only strings
}

TEST_CASE("an invalid pattern is a violation, not an exception") {
  const auto v = validate(J(R"({"pattern":"(unclosed"})"), "x");
  REQUIRE(v.has_value());
  CHECK(v->message.find("invalid pattern") != std::string::npos);
}

TEST_CASE("arrays: minItems, maxItems, uniqueItems, items with paths") {
  CHECK(why(J(R"({"minItems":1})"), json::array()) == "|must have at least 1 item, got 0");
  CHECK(why(J(R"({"maxItems":1})"), J("[1,2]")) == "|must have at most 1 items, got 2");
  CHECK(why(J(R"({"uniqueItems":true})"), J("[1,2,1]")) == "/2|duplicates item 0; items must be unique");
  CHECK(ok(J(R"({"uniqueItems":true})"), J("[1,2,3]")));
  CHECK(ok(J(R"({"uniqueItems":false})"), J("[1,1]")));
  CHECK(why(J(R"({"items":{"type":"string"}})"), J(R"(["a","b",3])")) == "/2|expected string, got integer");
}

TEST_CASE("objects: required, additionalProperties, properties, min/maxProperties") {
  const json s = J(R"({"type":"object","additionalProperties":false,"required":["path"],
                       "properties":{"path":{"type":"string"},"offset":{"type":"integer","minimum":0},
                                     "limit":{"type":"integer"}}})");
  CHECK(ok(s, J(R"({"path":"a.txt","offset":3})")));
  CHECK(why(s, J(R"({"offset":3})")) == "|missing required property 'path'");
  CHECK(why(s, J(R"({"path":"a","foo":1})")) == "|unexpected property 'foo' (allowed: limit, offset, path)");
  CHECK(why(s, J(R"({"path":"a","offset":-1})")) == "/offset|must be >= 0, got -1");
  CHECK(why(s, J(R"({"path":"a","offset":"3"})")) == "/offset|expected integer, got string");
  CHECK(why(s, "a.txt") == "|expected object, got string");

  CHECK(why(J(R"({"additionalProperties":false})"), J(R"({"x":1})")) ==
        "|unexpected property 'x' (allowed: none)");
  const json typed_extra = J(R"({"properties":{"a":{}},"additionalProperties":{"type":"string"}})");
  CHECK(ok(typed_extra, J(R"({"a":1,"b":"x"})")));
  CHECK(why(typed_extra, J(R"({"a":1,"b":2})")) == "/b|expected string, got integer");
  CHECK(ok(J(R"({"properties":{"a":{"type":"string"}}})"), J(R"({"b":5})")));  // open by default

  CHECK(why(J(R"({"minProperties":1})"), json::object()) == "|must have at least 1 property, got 0");
  CHECK(why(J(R"({"maxProperties":1})"), J(R"({"a":1,"b":2})")) == "|must have at most 1 properties, got 2");
}

TEST_CASE("paths: nested arrays of objects and pointer escaping") {
  const json s = J(R"({"type":"object","properties":{"edits":{"type":"array","items":{
      "type":"object","required":["old_text","new_text"],
      "properties":{"old_text":{"type":"string"},"new_text":{"type":"string"}}}}}})");
  CHECK(ok(s, J(R"({"edits":[{"old_text":"a","new_text":"b"}]})")));
  CHECK(why(s, J(R"({"edits":[{"old_text":"a","new_text":"b"},{"old_text":5,"new_text":"c"}]})")) ==
        "/edits/1/old_text|expected string, got integer");
  CHECK(why(s, J(R"({"edits":[{"old_text":"a"}]})")) == "/edits/0|missing required property 'new_text'");

  const json odd = J(R"({"properties":{"a/b":{"properties":{"c~d":{"type":"null"}}}}})");
  CHECK(why(odd, J(R"({"a/b":{"c~d":1}})")) == "/a~1b/c~0d|expected null, got integer");
}

TEST_CASE("$ref to $defs, definitions, and the root") {
  const json s = J(R"({"$defs":{"pos":{"type":"integer","minimum":0}},
                       "definitions":{"name":{"type":"string","minLength":1}},
                       "properties":{"offset":{"$ref":"#/$defs/pos"},"who":{"$ref":"#/definitions/name"}}})");
  CHECK(ok(s, J(R"({"offset":1,"who":"me"})")));
  CHECK(why(s, J(R"({"offset":-2})")) == "/offset|must be >= 0, got -2");
  CHECK(why(s, J(R"({"who":""})")) == "/who|must be at least 1 character long, got 0");

  // recursive: a tree of nodes
  const json tree = J(R"({"type":"object","properties":{"children":{"type":"array","items":{"$ref":"#"}},
                          "v":{"type":"integer"}}})");
  CHECK(ok(tree, J(R"({"children":[{"children":[{"v":1}]}]})")));
  CHECK(why(tree, J(R"({"children":[{"children":[{"v":"x"}]}]})")) ==
        "/children/0/children/0/v|expected integer, got string");

  // siblings of $ref apply too (2020-12)
  CHECK(why(J(R"({"$defs":{"s":{"type":"string"}},"$ref":"#/$defs/s","maxLength":1})"), "ab") ==
        "|must be at most 1 characters long, got 2");
  CHECK(why(J(R"({"$ref":"#/$defs/missing"})"), 1) == "|schema error: $ref '#/$defs/missing' does not resolve");
}

TEST_CASE("a self-referencing $ref loop ends with a violation, not a crash") {
  const auto v = validate(J(R"({"$defs":{"a":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"})"), 1);
  REQUIRE(v.has_value());
  CHECK(v->message.find("too deep") != std::string::npos);
}

TEST_CASE("allOf, anyOf, not") {
  const json all = J(R"({"allOf":[{"type":"integer"},{"minimum":3}]})");
  CHECK(ok(all, 4));
  CHECK(why(all, 2) == "|must be >= 3, got 2");
  const json any = J(R"({"anyOf":[{"type":"string"},{"type":"integer"}]})");
  CHECK(ok(any, "x"));
  CHECK(ok(any, 1));
  CHECK(why(any, true) == "|expected string or integer, got boolean");
  CHECK(why(J(R"({"not":{"type":"string"}})"), "x") == "|must not match the schema {\"type\":\"string\"}");
  CHECK(ok(J(R"({"not":{"type":"string"}})"), 1));
}

TEST_CASE("oneOf: exactly one; failures report the most plausible branch") {
  const json one = J(R"({"oneOf":[{"type":"integer"},{"type":"number","minimum":10}]})");
  CHECK(ok(one, 3));  // integer only (3 < 10)
  CHECK(why(one, 12) == "|matches more than one alternative (oneOf branches 0, 1); it must match exactly one");
  CHECK(ok(one, 12.5));

  // merged value sets
  CHECK(why(J(R"({"oneOf":[{"const":"a"},{"const":"b"},{"enum":["c","a"]}]})"), "z") ==
        "|must be one of: a, b, c");

  // string or object: for an object, the object branch's own complaint is what helps
  const json str_or_obj = J(R"({"oneOf":[{"type":"string"},
      {"type":"object","required":["path"],"properties":{"path":{"type":"string"}}}]})");
  CHECK(why(str_or_obj, json::object()) == "|missing required property 'path'");
  CHECK(why(str_or_obj, 5) == "|expected string or object, got integer");

  // tagged union: the branch whose discriminator matches wins even though another fails "earlier"
  const json tagged = J(R"({"$defs":{
      "a":{"type":"object","required":["kind","x"],"properties":{"kind":{"const":"a"},"x":{"type":"string"}}},
      "b":{"type":"object","required":["kind","y"],"properties":{"kind":{"const":"b"},"y":{"type":"integer"}}}},
      "oneOf":[{"$ref":"#/$defs/a"},{"$ref":"#/$defs/b"}]})");
  CHECK(ok(tagged, J(R"({"kind":"b","y":1})")));
  CHECK(why(tagged, J(R"({"kind":"b"})")) == "|missing required property 'y'");
  CHECK(why(tagged, J(R"({"kind":"b","y":"one"})")) == "/y|expected integer, got string");
  CHECK(why(tagged, J(R"({"kind":"a","x":2})")) == "/x|expected string, got integer");
}

TEST_CASE("anyOf inside a property reports at the property path") {
  const json s = J(R"({"properties":{"timeout":{"anyOf":[{"type":"integer","minimum":1},{"const":"none"}]}}})");
  CHECK(ok(s, J(R"({"timeout":5})")));
  CHECK(ok(s, J(R"({"timeout":"none"})")));
  CHECK(why(s, J(R"({"timeout":0})")) == "/timeout|must be >= 1, got 0");
  CHECK(why(s, J(R"({"timeout":"never"})")) == "/timeout|expected integer or \"none\", got string");
}

TEST_CASE("annotations are ignored by validate") {
  const json s = J(R"({"$schema":"https://json-schema.org/draft/2020-12/schema","$id":"x","title":"t",
      "description":"d","default":5,"examples":[1],"format":"uri","readOnly":true,"deprecated":false,
      "$comment":"c","type":"integer"})");
  CHECK(ok(s, 1));
  CHECK(why(s, "1") == "|expected integer, got string");
}

TEST_CASE("to_string") {
  CHECK(kiln::protocol::to_string(SchemaViolation{"", "missing required property 'path'"}) ==
        "missing required property 'path'");
  CHECK(kiln::protocol::to_string(SchemaViolation{"/edits/0", "x"}) == "at /edits/0: x");
}

TEST_CASE("unsupported_keyword accepts the whole subset") {
  const json s = J(R"({"$schema":"https://json-schema.org/draft/2020-12/schema","title":"t",
      "type":"object","additionalProperties":false,"required":["a"],"minProperties":1,"maxProperties":9,
      "$defs":{"n":{"type":["integer","null"],"minimum":0,"maximum":9,"exclusiveMinimum":-1,
                    "exclusiveMaximum":10,"multipleOf":1}},
      "definitions":{"s":{"type":"string","minLength":0,"maxLength":5,"pattern":"^a","format":"uri"}},
      "properties":{
        "a":{"$ref":"#/$defs/n","description":"d","default":1,"examples":[1]},
        "b":{"type":"array","items":{"$ref":"#/definitions/s"},"minItems":0,"maxItems":3,"uniqueItems":true},
        "c":{"oneOf":[{"const":1},{"enum":[2,3]}]},
        "d":{"anyOf":[true,{"not":{"type":"null"}}]},
        "e":{"allOf":[{"readOnly":true,"deprecated":true,"$comment":"x"}]},
        "f":{"additionalProperties":{"type":"string"}}}})");
  const auto problem = unsupported_keyword(s);
  CHECK_MESSAGE(!problem.has_value(), problem.value_or(""));
}

TEST_CASE("unsupported_keyword finds unknown keywords anywhere, with their location") {
  CHECK(unsupported_keyword(J(R"({"patternProperties":{}})")) ==
        "unsupported keyword 'patternProperties' at the schema root");
  CHECK(unsupported_keyword(J(R"({"properties":{"env":{"type":"object","propertyNames":{}}}})")) ==
        "unsupported keyword 'propertyNames' at /properties/env");
  CHECK(unsupported_keyword(J(R"({"properties":{"a":{"items":{"if":{}}}}})")) ==
        "unsupported keyword 'if' at /properties/a/items");
  CHECK(unsupported_keyword(J(R"({"oneOf":[{},{"prefixItems":[]}]})")) ==
        "unsupported keyword 'prefixItems' at /oneOf/1");
  CHECK(unsupported_keyword(J(R"({"$defs":{"x/y":{"dependentRequired":{}}}})")) ==
        "unsupported keyword 'dependentRequired' at /$defs/x~1y");
  // a property *named* like a keyword is fine; annotation values are data, not schemas
  CHECK_FALSE(unsupported_keyword(J(R"({"properties":{"if":{"type":"string"}},"default":{"if":"1"}})")));
}

TEST_CASE("unsupported_keyword rejects unusable keyword values") {
  CHECK(unsupported_keyword(J(R"({"type":"text"})")) ==
        "invalid 'type' at the schema root: must be a JSON type name or an array of them");
  CHECK(unsupported_keyword(J(R"({"properties":{"p":{"minLength":-1}}})")) ==
        "invalid 'minLength' at /properties/p: must be a non-negative integer");
  CHECK(unsupported_keyword(J(R"({"required":"path"})")) ==
        "invalid 'required' at the schema root: must be an array of strings");
  CHECK(unsupported_keyword(J(R"({"items":[{}]})")).value_or("").find("tuple") != std::string::npos);
  CHECK(unsupported_keyword(J(R"({"exclusiveMinimum":true})")) ==
        "invalid 'exclusiveMinimum' at the schema root: must be a number");
  CHECK(unsupported_keyword(J(R"({"pattern":"(["})")).value_or("").starts_with("invalid 'pattern'"));
  CHECK(unsupported_keyword(J(R"({"$ref":"#/$defs/nope"})")).value_or("").starts_with("invalid '$ref'"));
  CHECK(unsupported_keyword(J(R"({"$ref":"https://example.com/s.json"})")).value_or("").find("local") !=
        std::string::npos);
  CHECK(unsupported_keyword(J(R"({"oneOf":[]})")).has_value());
  CHECK(unsupported_keyword(J(R"({"properties":{"a":5}})")) ==
        "invalid schema at /properties/a: must be an object or a boolean");
  CHECK(unsupported_keyword(json(true)) == std::nullopt);
}
