// Decoding of MCP request params: the happy paths, defaults, and that every failure names the
// exact JSON path of the bad field.
#include <doctest/doctest.h>

#include <string>

#include "protocol/mcp_params.h"

using namespace kiln::protocol;
using kiln::Errc;
using nlohmann::json;

namespace {

json J(const char* text) { return json::parse(text); }

template <class T>
std::string error_of(const kiln::Result<T>& r) {
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().code == Errc::invalid_argument);
  return r.error().message;
}

}  // namespace

TEST_CASE("initialize: full params") {
  const auto r = decode_initialize(J(R"({"protocolVersion":"2025-11-25",
      "capabilities":{"roots":{"listChanged":true}},
      "clientInfo":{"name":"claude-code","version":"2.1.0","title":"Claude Code"}})"));
  REQUIRE(r.has_value());
  CHECK(r->protocol_version == "2025-11-25");
  CHECK(r->capabilities.at("roots").at("listChanged") == true);
  CHECK(r->client_name == "claude-code");
  CHECK(r->client_version == "2.1.0");
}

TEST_CASE("initialize: capabilities default to {}") {
  const auto r = decode_initialize(J(R"({"protocolVersion":"x","clientInfo":{"name":"n","version":"v"}})"));
  REQUIRE(r.has_value());
  CHECK(r->capabilities == json::object());
}

TEST_CASE("initialize: errors name the field") {
  CHECK(error_of(decode_initialize(nullptr)) == "params.protocolVersion: required field is missing");
  CHECK(error_of(decode_initialize(json::array())) == "params: expected object, got array");
  CHECK(error_of(decode_initialize(J(R"({"protocolVersion":20251125})"))) ==
        "params.protocolVersion: expected string, got integer");
  CHECK(error_of(decode_initialize(J(R"({"protocolVersion":"v"})"))) ==
        "params.clientInfo: required field is missing");
  CHECK(error_of(decode_initialize(J(R"({"protocolVersion":"v","clientInfo":"me"})"))) ==
        "params.clientInfo: expected object, got string");
  CHECK(error_of(decode_initialize(J(R"({"protocolVersion":"v","clientInfo":{"name":5,"version":"1"}})"))) ==
        "params.clientInfo.name: expected string, got integer");
  CHECK(error_of(decode_initialize(J(R"({"protocolVersion":"v","clientInfo":{"name":"n"}})"))) ==
        "params.clientInfo.version: required field is missing");
  CHECK(error_of(decode_initialize(
            J(R"({"protocolVersion":"v","capabilities":[],"clientInfo":{"name":"n","version":"1"}})"))) ==
        "params.capabilities: expected object, got array");
}

TEST_CASE("tools/call") {
  const auto r = decode_call_tool(J(R"({"name":"file_read","arguments":{"path":"a"}})"));
  REQUIRE(r.has_value());
  CHECK(r->name == "file_read");
  CHECK(r->arguments == json{{"path", "a"}});

  const auto no_args = decode_call_tool(J(R"({"name":"workspace_list"})"));
  REQUIRE(no_args.has_value());
  CHECK(no_args->arguments == json::object());
  const auto null_args = decode_call_tool(J(R"({"name":"workspace_list","arguments":null})"));
  REQUIRE(null_args.has_value());
  CHECK(null_args->arguments == json::object());

  CHECK(error_of(decode_call_tool(nullptr)) == "params.name: required field is missing");
  CHECK(error_of(decode_call_tool(J(R"({"name":["x"]})"))) == "params.name: expected string, got array");
  CHECK(error_of(decode_call_tool(J(R"({"name":"x","arguments":[1]})"))) ==
        "params.arguments: expected object, got array");
}

TEST_CASE("progress token") {
  CHECK(progress_token(nullptr).value() == std::nullopt);
  CHECK(progress_token(J(R"({"name":"x"})")).value() == std::nullopt);
  CHECK(progress_token(J(R"({"_meta":{}})")).value() == std::nullopt);
  CHECK(progress_token(J(R"({"_meta":{"progressToken":"tok"}})")).value() == json("tok"));
  CHECK(progress_token(J(R"({"_meta":{"progressToken":0}})")).value() == json(0));
  CHECK(error_of(progress_token(J(R"({"_meta":{"progressToken":1.5}})"))) ==
        "params._meta.progressToken: expected string or integer, got number");
  CHECK(error_of(progress_token(J(R"({"_meta":{"progressToken":null}})"))) ==
        "params._meta.progressToken: expected string or integer, got null");
  CHECK(error_of(progress_token(J(R"({"_meta":"x"})"))) == "params._meta: expected object, got string");
}

TEST_CASE("cursor") {
  CHECK(cursor(nullptr).value() == std::nullopt);
  CHECK(cursor(json::object()).value() == std::nullopt);
  CHECK(cursor(J(R"({"cursor":"abc"})")).value() == std::optional<std::string>("abc"));
  CHECK(error_of(cursor(J(R"({"cursor":3})"))) == "params.cursor: expected string, got integer");
  CHECK(error_of(cursor(json("x"))) == "params: expected object, got string");
}

TEST_CASE("notifications/cancelled") {
  const auto r = decode_cancelled(J(R"({"requestId":"abc","reason":"user pressed stop"})"));
  REQUIRE(r.has_value());
  CHECK(r->request_id == "abc");
  CHECK(r->reason == "user pressed stop");
  const auto n = decode_cancelled(J(R"({"requestId":12})"));
  REQUIRE(n.has_value());
  CHECK(n->request_id == 12);
  CHECK(n->reason.empty());

  CHECK(error_of(decode_cancelled(json::object())) == "params.requestId: required field is missing");
  CHECK(error_of(decode_cancelled(J(R"({"requestId":null})"))) ==
        "params.requestId: expected string or integer, got null");
  CHECK(error_of(decode_cancelled(J(R"({"requestId":1,"reason":7})"))) ==
        "params.reason: expected string, got integer");
}

TEST_CASE("logging/setLevel and level ranks") {
  CHECK(log_level_rank("debug") == 0);
  CHECK(log_level_rank("info") == 1);
  CHECK(log_level_rank("notice") == 2);
  CHECK(log_level_rank("warning") == 3);
  CHECK(log_level_rank("error") == 4);
  CHECK(log_level_rank("critical") == 5);
  CHECK(log_level_rank("alert") == 6);
  CHECK(log_level_rank("emergency") == 7);
  CHECK(log_level_rank("warn") == -1);
  CHECK(log_level_rank("DEBUG") == -1);
  CHECK(log_level_rank("") == -1);

  const auto r = decode_set_level(J(R"({"level":"warning"})"));
  REQUIRE(r.has_value());
  CHECK(r->level == "warning");
  CHECK(error_of(decode_set_level(J(R"({"level":"verbose"})"))) ==
        "params.level: 'verbose' is not a log level; use one of: debug, info, notice, warning, error, "
        "critical, alert, emergency");
  CHECK(error_of(decode_set_level(J(R"({"level":3})"))) == "params.level: expected string, got integer");
  CHECK(error_of(decode_set_level(nullptr)) == "params.level: required field is missing");
}

TEST_CASE("resources/read") {
  const auto r = decode_read_resource(J(R"({"uri":"kiln://trace/1"})"));
  REQUIRE(r.has_value());
  CHECK(r->uri == "kiln://trace/1");
  CHECK(error_of(decode_read_resource(json::object())) == "params.uri: required field is missing");
  CHECK(error_of(decode_read_resource(J(R"({"uri":{}})"))) == "params.uri: expected string, got object");
}

TEST_CASE("prompts/get") {
  const auto r = decode_get_prompt(J(R"({"name":"review","arguments":{"path":"a.c","focus":"tests"}})"));
  REQUIRE(r.has_value());
  CHECK(r->name == "review");
  CHECK(r->arguments == std::map<std::string, std::string>{{"focus", "tests"}, {"path", "a.c"}});
  const auto bare = decode_get_prompt(J(R"({"name":"p"})"));
  REQUIRE(bare.has_value());
  CHECK(bare->arguments.empty());

  CHECK(error_of(decode_get_prompt(J(R"({"name":"p","arguments":{"n":3}})"))) ==
        "params.arguments.n: expected string, got integer");
  CHECK(error_of(decode_get_prompt(J(R"({"name":"p","arguments":[]})"))) ==
        "params.arguments: expected object, got array");
  CHECK(error_of(decode_get_prompt(J(R"({"arguments":{}})"))) == "params.name: required field is missing");
}

TEST_CASE("completion/complete") {
  const auto p = decode_complete(J(R"({"ref":{"type":"ref/prompt","name":"review"},
      "argument":{"name":"path","value":"sr"},"context":{"arguments":{"focus":"tests"}}})"));
  REQUIRE(p.has_value());
  CHECK(p->ref_type == "ref/prompt");
  CHECK(p->ref_name_or_uri == "review");
  CHECK(p->argument_name == "path");
  CHECK(p->argument_value == "sr");
  CHECK(p->context_arguments == json{{"focus", "tests"}});

  const auto res = decode_complete(J(R"({"ref":{"type":"ref/resource","uri":"kiln://trace/{id}"},
      "argument":{"name":"id","value":""}})"));
  REQUIRE(res.has_value());
  CHECK(res->ref_type == "ref/resource");
  CHECK(res->ref_name_or_uri == "kiln://trace/{id}");
  CHECK(res->context_arguments == json::object());

  CHECK(error_of(decode_complete(json::object())) == "params.ref: required field is missing");
  CHECK(error_of(decode_complete(J(R"({"ref":{"type":"ref/tool","name":"x"}})"))) ==
        "params.ref.type: 'ref/tool' is not one of: ref/prompt, ref/resource");
  CHECK(error_of(decode_complete(J(R"({"ref":{"type":"ref/resource","name":"x"}})"))) ==
        "params.ref.uri: required field is missing");
  CHECK(error_of(decode_complete(J(R"({"ref":{"type":"ref/prompt","name":"x"}})"))) ==
        "params.argument: required field is missing");
  CHECK(error_of(decode_complete(J(R"({"ref":{"type":"ref/prompt","name":"x"},"argument":{"name":"a","value":1}})"))) ==
        "params.argument.value: expected string, got integer");
  CHECK(error_of(decode_complete(J(R"({"ref":{"type":"ref/prompt","name":"x"},"argument":{"name":"a","value":""},
      "context":{"arguments":{"k":false}}})"))) == "params.context.arguments.k: expected string, got boolean");
  CHECK(error_of(decode_complete(J(R"({"ref":{"type":"ref/prompt","name":"x"},"argument":{"name":"a","value":""},
      "context":[]})"))) == "params.context: expected object, got array");
}
