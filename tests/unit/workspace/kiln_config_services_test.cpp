// kiln.json "services": the typed result (kinds, default ports, commands, setup) and every rule the
// schema cannot say, each with the JSON path a person needs to find the mistake.
#include <doctest/doctest.h>

#include "workspace/kiln_config.h"

#include "kiln_config_errors.h"

using kiln::server::parse_kiln_config;
using kiln::server::ServiceKind;

namespace {

std::string error_of(std::string_view text) { return kiln::test::config_error_of(text); }

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("the services example of TOOLS.md loads with kinds, ports and commands") {
  auto r = parse_kiln_config(R"({"services": {
    "db": {"kind": "postgres", "setup": "node migrate.js"},
    "cache": {"kind": "redis"},
    "api": {"run": "node server.js", "port": 3000, "ready": "/health"}}})");
  REQUIRE(r);
  REQUIRE(r->services.size() == 3);
  // In name order, as the JSON object is read.
  const auto& api = r->services[0];
  const auto& cache = r->services[1];
  const auto& db = r->services[2];
  CHECK(api.name == "api");
  CHECK(api.kind == ServiceKind::command);
  CHECK(api.argv == std::vector<std::string>{"/bin/sh", "-c", "node server.js"});
  CHECK(api.port == 3000);
  CHECK(api.ready_path == "/health");
  CHECK(cache.kind == ServiceKind::redis);
  CHECK(cache.port == 6379);
  CHECK(db.kind == ServiceKind::postgres);
  CHECK(db.port == 5432);
  CHECK(db.setup_argv == std::vector<std::string>{"/bin/sh", "-c", "node migrate.js"});
  CHECK(db.ready_timeout_s == 60);
}

TEST_CASE("default ports step past ports taken; a port used twice is refused") {
  auto r = parse_kiln_config(R"({"services": {"a": {"kind": "postgres"}, "b": {"kind": "postgres"},
                                              "c": {"run": "x", "port": 5433}}})");
  REQUIRE(r);
  CHECK(r->services[0].port == 5432);
  CHECK(r->services[1].port == 5434);  // 5433 belongs to c
  std::string e = error_of(R"({"services": {"a": {"run": "x", "port": 80}, "b": {"run": "y", "port": 80}}})");
  CHECK(has(e, "/services/b/port"));
  CHECK(has(e, "already used by service \"a\""));
}

TEST_CASE("service rules the schema cannot say name the path") {
  CHECK(has(error_of(R"({"services": {"api": {"run": "x"}}})"), "/services/api: kind command needs \"port\""));
  CHECK(has(error_of(R"({"services": {"api": {"port": 3000}}})"), "/services/api: needs \"kind\""));
  CHECK(has(error_of(R"({"services": {"Api": {"kind": "redis"}}})"), "lower-case letters"));
  CHECK(has(error_of(R"({"services": {"db": {"kind": "postgres", "run": "pg"}}})"), "/services/db/run"));
  CHECK(has(error_of(R"({"services": {"c": {"kind": "redis", "setup": "x"}}})"), "/services/c/setup: only kind postgres"));
  CHECK(has(error_of(R"({"services": {"c": {"kind": "redis", "ready": "/x"}}})"), "/services/c/ready"));
  CHECK(has(error_of(R"({"services": {"api": {"run": "x", "port": 1, "cwd": "../out"}}})"), "/services/api/cwd"));
  CHECK(has(error_of(R"({"services": {"api": {"run": "x", "port": 1, "env": {"1X": "y"}}}})"), "/services/api/env/1X"));
  CHECK(has(error_of(R"({"services": {"api": {"run": "x", "port": 70000}}})"), "/services/api/port"));
  CHECK(has(error_of(R"({"services": {"api": {"run": "x", "port": 1, "ready": "health"}}})"), "/services/api/ready"));
  CHECK(has(error_of(R"({"services": {"db": {"kind": "mysql"}}})"), "/services/db/kind"));
  CHECK(has(error_of(R"({"services": {"db": {"kind": "postgres", "prot": 1}}})"), "/services/db"));
  CHECK(has(error_of(R"({"services": {"a-b": {"kind": "redis"}, "a_b": {"kind": "redis"}}})"),
            "both become KILN_SERVICE_A_B_URL"));
}

TEST_CASE("a check's services must be declared, and are kept on the check") {
  auto r = parse_kiln_config(R"({"services": {"db": {"kind": "postgres"}},
                                "verify": [{"name": "it", "run": "npm test", "services": ["db"]}]})");
  REQUIRE(r);
  CHECK(r->checks[0].services == std::vector<std::string>{"db"});
  std::string e = error_of(R"({"verify": [{"name": "it", "run": "x", "services": ["db"]}]})");
  CHECK(has(e, "/verify/0/services/0"));
  CHECK(has(e, "no service named \"db\""));
}

TEST_CASE("a service survives the JSON an app version stores, field for field") {
  auto r = parse_kiln_config(R"({"services": {
    "db": {"kind": "postgres", "setup": ["node", "migrate.js"], "env": {"A": "1"}, "description": "main"},
    "cache": {"kind": "redis", "port": 7000},
    "api": {"run": "node server.js", "port": 3000, "ready": "/health", "cwd": "srv", "ready_timeout_s": 5}}})");
  REQUIRE(r);
  for (const auto& s : r->services) {
    INFO(s.name);
    auto back = kiln::server::service_config_from_json(kiln::server::to_json(s));
    REQUIRE_MESSAGE(back.has_value(), (back ? "" : back.error().message));
    CHECK(back->name == s.name);
    CHECK(back->kind == s.kind);
    CHECK(back->argv == s.argv);
    CHECK(back->display == s.display);
    CHECK(back->port == s.port);
    CHECK(back->ready_path == s.ready_path);
    CHECK(back->setup_argv == s.setup_argv);
    CHECK(back->setup_display == s.setup_display);
    CHECK(back->env == s.env);
    CHECK(back->cwd == s.cwd);
    CHECK(back->ready_timeout_s == s.ready_timeout_s);
    CHECK(back->description == s.description);
    CHECK(kiln::server::to_json(*back) == kiln::server::to_json(s));
  }
}

TEST_CASE("stored service JSON of the wrong shape is refused, not half-read") {
  using kiln::server::service_config_from_json;
  CHECK_FALSE(service_config_from_json(nlohmann::json::object()));
  CHECK_FALSE(service_config_from_json({{"name", "db"}, {"kind", "mysql"}, {"port", 1}}));
  CHECK_FALSE(service_config_from_json({{"name", "api"}, {"kind", "command"}, {"port", 3000}}));  // no command
  CHECK_FALSE(service_config_from_json({{"name", "db"}, {"kind", "postgres"}, {"port", "x"}}));
  auto ok = service_config_from_json({{"name", "db"}, {"kind", "postgres"}, {"port", 5432}});
  REQUIRE(ok);
  CHECK(ok->kind == ServiceKind::postgres);
}
