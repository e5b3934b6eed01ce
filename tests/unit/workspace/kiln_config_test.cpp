// kiln.json loading: the typed result for valid files, and for each kind of mistake the exact
// message a person (or agent) gets, since that message is all they have to fix the file.
#include <doctest/doctest.h>

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "protocol/json_schema.h"
#include "workspace/kiln_config.h"

#include "kiln_config_errors.h"
#include "workspace/root.h"

using nlohmann::json;
using kiln::server::parse_kiln_config;

namespace {

std::string error_of(std::string_view text) { return kiln::test::config_error_of(text); }

// Every property an editor can complete must carry a title and a description.
void require_documented(const json& schema, const std::string& where) {
  if (!schema.is_object()) return;
  if (auto props = schema.find("properties"); props != schema.end()) {
    for (const auto& [name, sub] : props->items()) {
      INFO(where << "/properties/" << name);
      CHECK(sub.contains("title"));
      CHECK(sub.contains("description"));
      require_documented(sub, where + "/properties/" + name);
    }
  }
  for (const char* k : {"items", "additionalProperties"}) {
    if (auto it = schema.find(k); it != schema.end()) require_documented(*it, where + "/" + k);
  }
  if (auto defs = schema.find("$defs"); defs != schema.end()) {
    for (const auto& [name, sub] : defs->items()) require_documented(sub, where + "/$defs/" + name);
  }
  if (schema.value("type", "") == "object" && schema.contains("properties")) {
    INFO(where);
    CHECK(schema.value("additionalProperties", true) == false);
  }
}

}  // namespace

TEST_CASE("the embedded kiln.json schema is usable and documented") {
  const json& s = kiln::server::kiln_config_schema();
  REQUIRE(s.is_object());
  CHECK(s["$id"] == "https://kiln.dev/schemas/kiln.schema.json");
  CHECK_FALSE(kiln::protocol::unsupported_keyword(s).has_value());
  require_documented(s, "");
}

TEST_CASE("the example in TOOLS.md loads into typed checks") {
  auto r = parse_kiln_config(R"({
    "verify": [
      {"name": "build", "run": "make -j2"},
      {"name": "test", "run": "make check", "report": {"format": "junit", "path": "build/test-results.xml"}}
    ],
    "sandbox": {"network": "none", "limits": {"wall_s": 600, "memory_mb": 2048}, "env": {"CI": "1"}, "secrets": ["NPM_TOKEN"]},
    "publish": {"path": "dist", "share": "password"}
  })");
  REQUIRE_MESSAGE(r.has_value(), (r ? "" : r.error().message));
  REQUIRE(r->checks.size() == 2);
  CHECK(r->checks[0].name == "build");
  CHECK(r->checks[0].argv == std::vector<std::string>{"/bin/sh", "-c", "make -j2"});
  CHECK(r->checks[0].display == "make -j2");
  CHECK_FALSE(r->checks[0].report.has_value());
  CHECK_FALSE(r->checks[0].on_failure_continue);
  REQUIRE(r->checks[1].report.has_value());
  CHECK(r->checks[1].report->format == "junit");
  CHECK(r->checks[1].report->path == "build/test-results.xml");
  CHECK(r->sandbox["limits"]["memory_mb"] == 2048);
  CHECK(r->sandbox["secrets"] == json::array({"NPM_TOKEN"}));
  CHECK(r->publish.path == "dist");
  CHECK(r->publish.share == "password");
  CHECK(r->publish.name.empty());
  CHECK(r->raw["verify"].size() == 2);
  CHECK(r->source == "kiln.json");
}

TEST_CASE("every check field is typed") {
  auto r = parse_kiln_config(R"({
    "$schema": "https://kiln.dev/schemas/kiln.schema.json",
    "verify": [{
      "name": "unit.tests-1", "run": ["node", "--test", "test/"], "description": "unit tests",
      "cwd": "packages/core", "timeout_s": 90.5, "env": {"NODE_ENV": "test", "_X": ""},
      "report": {"format": "tap", "path": "out/results.tap"}, "on_failure": "continue"
    }],
    "sandbox": {"network": "loopback", "isolation": "strict",
                "limits": {"wall_s": 1, "cpu_s": 0.5, "memory_mb": 1, "pids": 64, "output_bytes": 1024, "file_size_mb": 1}}
  })");
  REQUIRE_MESSAGE(r.has_value(), (r ? "" : r.error().message));
  const auto& c = r->checks.at(0);
  CHECK(c.name == "unit.tests-1");
  CHECK(c.argv == std::vector<std::string>{"node", "--test", "test/"});
  CHECK(c.display == R"(["node","--test","test/"])");
  CHECK(c.description == "unit tests");
  CHECK(c.cwd == "packages/core");
  CHECK(c.timeout_s == doctest::Approx(90.5));
  CHECK(c.env == std::map<std::string, std::string>{{"NODE_ENV", "test"}, {"_X", ""}});
  REQUIRE(c.report.has_value());
  CHECK(c.report->format == "tap");
  CHECK(c.on_failure_continue);
  CHECK(r->sandbox["network"] == "loopback");
}

TEST_CASE("an empty object and a cwd of '.' are fine") {
  auto r = parse_kiln_config("{}");
  REQUIRE(r.has_value());
  CHECK(r->checks.empty());
  CHECK(r->sandbox == json::object());
  auto dot = parse_kiln_config(R"({"verify": [{"name": "a", "run": "true", "cwd": "."}]})");
  REQUIRE(dot.has_value());
  CHECK(dot->checks[0].cwd.empty());
}

TEST_CASE("schema violations name the JSON pointer of the bad value") {
  CHECK(error_of(R"({"verify": [{"name": "a", "run": "x"},
                                {"name": "b", "run": "y", "report": {"format": "xml", "path": "r.xml"}}]})") ==
        R"(kiln.json: /verify/1/report/format: expected one of "junit", "tap" (got "xml"))");
  CHECK(error_of(R"({"verify": [{"name": "a"}]})") == "kiln.json: /verify/0: missing required property 'run'");
  CHECK(error_of(R"({"verify": [{"name": "a", "run": "x", "timeout_s": "10"}]})") ==
        "kiln.json: /verify/0/timeout_s: expected number, got string");
  CHECK(error_of(R"({"verify": [{"name": "a", "run": "x", "timeout_s": 0}]})") ==
        "kiln.json: /verify/0/timeout_s: must be > 0, got 0");
  CHECK(error_of(R"({"verify": [{"name": "a", "run": 5}]})") ==
        "kiln.json: /verify/0/run: expected string or array, got integer");
  CHECK(error_of(R"({"verify": [{"name": "a", "run": []}]})") ==
        "kiln.json: /verify/0/run: must have at least 1 item, got 0");
  CHECK(error_of(R"({"verify": [{"name": "a", "run": ["make", 2]}]})") ==
        "kiln.json: /verify/0/run/1: expected string, got integer");
  CHECK(error_of(R"({"verify": [{"name": "a", "run": [""]}]})") ==
        "kiln.json: /verify/0/run/0: the program name is empty");
  CHECK(error_of(R"({"verify": [{"name": "has space", "run": "x"}]})") ==
        "kiln.json: /verify/0/name: must match the pattern ^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$");
  CHECK(error_of(R"({"verify": [{"name": "a", "run": "x", "on_failure": "ignore"}]})") ==
        R"(kiln.json: /verify/0/on_failure: expected one of "stop", "continue" (got "ignore"))");
  CHECK(error_of(R"({"verify": [{"name": "a", "run": "x", "env": {"A": 1}}]})") ==
        "kiln.json: /verify/0/env/A: expected string, got integer");
  CHECK(error_of(R"({"verify": {"name": "a"}})") == "kiln.json: /verify: expected array, got object");
  CHECK(error_of(R"({"sandbox": {"network": "internet"}})") ==
        R"(kiln.json: /sandbox/network: expected "none" or "loopback" or "host" or object, got string)");
  CHECK(error_of(R"({"sandbox": {"limits": {"memory_mb": 0}}})") ==
        "kiln.json: /sandbox/limits/memory_mb: must be >= 1, got 0");
  CHECK(error_of(R"({"sandbox": {"limits": {"memory_mb": 1.5}}})") ==
        "kiln.json: /sandbox/limits/memory_mb: expected integer, got number");
  CHECK(error_of(R"({"sandbox": {"limits": {"wall_s": 100000}}})") ==
        "kiln.json: /sandbox/limits/wall_s: must be <= 86400, got 100000");
  CHECK(error_of(R"({"sandbox": {"secrets": ["NPM-TOKEN"]}})") ==
        "kiln.json: /sandbox/secrets/0: must match the pattern ^[A-Za-z_][A-Za-z0-9_]*$");
  CHECK(error_of(R"({"publish": {"share": "everyone"}})") ==
        R"(kiln.json: /publish/share: expected one of "public", "password", "invite" (got "everyone"))");
  CHECK(error_of("[]") == "kiln.json: expected object, got array");
}

TEST_CASE("a misspelt key is named, with a guess at the intended one") {
  CHECK(error_of(R"({"verfy": []})") ==
        "kiln.json: unexpected property 'verfy' (allowed: $schema, app, checkpoints, publish, sandbox, services, verify); did you "
        "mean 'verify'?");
  CHECK(error_of(R"({"sandbox": {"limits": {"memory": 10}}})") ==
        "kiln.json: /sandbox/limits: unexpected property 'memory' (allowed: cpu_s, disk_mb, file_size_mb, memory_mb, "
        "output_bytes, pids, wall_s)");
  CHECK(error_of(R"({"verify": [{"name": "a", "run": "x", "timeout": 5}]})") ==
        "kiln.json: /verify/0: unexpected property 'timeout' (allowed: cwd, description, env, name, on_failure, "
        "report, run, services, timeout_s); did you mean 'timeout_s'?");
}

TEST_CASE("check names must be unique, and the error names both places") {
  CHECK(error_of(R"({"verify": [{"name": "build", "run": "make"}, {"name": "test", "run": "make check"},
                                {"name": "build", "run": "make all"}]})") ==
        R"(kiln.json: /verify/2/name: check name "build" is already used by /verify/0; check names must be unique)");
}

TEST_CASE("paths must stay inside the workspace") {
  CHECK(error_of(R"({"verify": [{"name": "a", "run": "x", "cwd": "../other"}]})") ==
        R"(kiln.json: /verify/0/cwd: "../other" leaves the workspace through '..'; use a path inside the workspace, relative to its root)");
  CHECK(error_of(R"({"verify": [{"name": "a", "run": "x", "report": {"format": "junit", "path": "build/../../r.xml"}}]})") ==
        R"(kiln.json: /verify/0/report/path: "build/../../r.xml" leaves the workspace through '..'; use a path inside the workspace, relative to its root)");
  CHECK(error_of(R"({"publish": {"path": "/etc"}})") ==
        R"(kiln.json: /publish/path: "/etc" is absolute; use a path inside the workspace, relative to its root)");
  CHECK(error_of(R"({"publish": {"path": ".."}})").find("leaves the workspace") != std::string::npos);
  // Dots that are not a whole component are ordinary names.
  CHECK(parse_kiln_config(R"({"publish": {"path": "..dist/a..b/.hidden"}})").has_value());
}

TEST_CASE("environment variable names are checked where the schema cannot") {
  CHECK(error_of(R"({"sandbox": {"env": {"1BAD": "x"}}})") ==
        R"(kiln.json: /sandbox/env/1BAD: "1BAD" is not an environment variable name (letters, digits and '_', not starting with a digit))");
  CHECK(error_of(R"({"verify": [{"name": "a", "run": "x", "env": {"A=B": "x"}}]})") ==
        R"(kiln.json: /verify/0/env/A=B: "A=B" is not an environment variable name (letters, digits and '_', not starting with a digit))");
  CHECK(error_of(R"({"sandbox": {"env": {"A": "x\u0000y"}}})") == "kiln.json: /sandbox/env/A: contains a NUL byte");
}

TEST_CASE("broken JSON is reported by line and column") {
  const std::string text =
      "{\n"
      "  \"verify\": [\n"
      "    {\"name\": \"a\", \"run\": \"x\"},\n"
      "    {\"name\": \"b\" \"run\": \"y\"}\n"
      "  ]\n"
      "}\n";
  CHECK(error_of(text) ==
        "kiln.json: line 4, column 22: syntax error while parsing object - unexpected string literal; expected '}'");
  CHECK(error_of("{\"verify\": [],}") ==
        "kiln.json: line 1, column 15: syntax error while parsing object key - unexpected '}'; expected string literal");
  CHECK(error_of("{\"a\":") == "kiln.json: line 1, column 6: syntax error while parsing value - unexpected end of "
                               "input; expected '[', '{', or a literal");
  CHECK(error_of(" \n") == "kiln.json: the file is empty; write {} (or delete the file) for the defaults");
  // Raw bytes of a broken file never reach a (UTF-8) message.
  const std::string bad = error_of("{\"verify\": \"\xff\"}");
  CHECK(bad.starts_with("kiln.json: line 1, column 13: "));
  CHECK(json(bad).dump().size() > 0);
}

TEST_CASE("a key given twice is an error rather than a silent last-wins") {
  CHECK(error_of(R"({"verify": [{"name": "a", "run": "x"}, {"name": "b", "run": "x", "run": "y"}]})") ==
        R"(kiln.json: /verify/1: duplicate key "run"; JSON keeps only the last one, so remove or merge the other)");
  CHECK(error_of(R"({"sandbox": {}, "sandbox": {}})") ==
        R"(kiln.json: duplicate key "sandbox"; JSON keeps only the last one, so remove or merge the other)");
  CHECK(error_of(R"({"sandbox": {"env": {"a/b~": "1", "x": "1", "x": "2"}}})") ==
        R"(kiln.json: /sandbox/env: duplicate key "x"; JSON keeps only the last one, so remove or merge the other)");
  // Equal keys in different objects are not duplicates.
  CHECK(parse_kiln_config(R"({"verify": [{"name": "a", "run": "x"}, {"name": "b", "run": "x"}]})").has_value());
}

TEST_CASE("the sample project's kiln.json is valid") {
  std::ifstream in(std::string(KILN_TEST_SOURCE_DIR) + "/examples/sample-project/kiln.json");
  REQUIRE(in.good());
  std::stringstream ss;
  ss << in.rdbuf();
  auto r = parse_kiln_config(ss.str());
  REQUIRE_MESSAGE(r.has_value(), (r ? "" : r.error().message));
  CHECK_FALSE(r->checks.empty());
}

TEST_CASE("load_config keeps the raw document when valid and falls back to defaults when not") {
  char tmpl[] = "/tmp/kiln-config-test-XXXXXX";
  const std::string dir = ::mkdtemp(tmpl);
  auto write = [&](const std::string& text) { std::ofstream(dir + "/kiln.json") << text; };
  auto root = kiln::workspace::Root::open(dir);
  REQUIRE(root.has_value());

  auto none = kiln::server::load_config(*root);
  CHECK(none.source == "defaults");
  CHECK(none.error.empty());
  CHECK_FALSE(none.typed.has_value());

  write(R"({"verify": [{"name": "t", "run": "make check"}], "sandbox": {"network": "host"}})");
  auto ok = kiln::server::load_config(*root);
  CHECK(ok.source == "kiln.json");
  CHECK(ok.error.empty());
  CHECK(ok.config["sandbox"]["network"] == "host");
  REQUIRE(ok.typed.has_value());
  CHECK(ok.typed->checks.at(0).name == "t");

  write(R"({"verfy": []})");
  auto bad = kiln::server::load_config(*root);
  CHECK(bad.source == "defaults");
  CHECK(bad.config == json::object());
  CHECK(bad.error.starts_with("kiln.json: unexpected property 'verfy'"));
  CHECK_FALSE(bad.typed.has_value());
  std::filesystem::remove_all(dir);
}

TEST_CASE("load_config reads the file on every call: an edit, and an edit back, are seen at once") {
  char tmpl[] = "/tmp/kiln-config-test-XXXXXX";
  const std::string dir = ::mkdtemp(tmpl);
  auto write = [&](const std::string& text) { std::ofstream(dir + "/kiln.json") << text; };
  auto root = kiln::workspace::Root::open(dir);
  REQUIRE(root.has_value());
  const std::string a = R"({"verify": [{"name": "a", "run": "make a"}]})";
  const std::string b = R"({"verify": [{"name": "b", "run": "make b"}]})";
  for (int round = 0; round < 3; ++round) {  // the parses are memoized by text: none may go stale
    write(a);
    auto ra = kiln::server::load_config(*root);
    REQUIRE(ra.typed.has_value());
    CHECK(ra.typed->checks.at(0).name == "a");
    write(b);
    auto rb = kiln::server::load_config(*root);
    REQUIRE(rb.typed.has_value());
    CHECK(rb.typed->checks.at(0).name == "b");
    write(R"({"verfy": []})");
    CHECK(kiln::server::load_config(*root).error.starts_with("kiln.json: unexpected property 'verfy'"));
  }
  // A large file (past what the memo keeps) loads the same way.
  std::string big = R"({"verify": [)";
  for (int i = 0; i < 3000; ++i) big += (i ? "," : "") + std::string(R"({"name": "c)") + std::to_string(i) + R"(", "run": "true"})";
  big += "]}";
  REQUIRE(big.size() > 64 * 1024);
  write(big);
  for (int i = 0; i < 2; ++i) {
    auto rc = kiln::server::load_config(*root);
    REQUIRE_MESSAGE(rc.typed.has_value(), rc.error);
    CHECK(rc.typed->checks.size() == 3000);
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("the app section of TOOLS.md loads with its services, schedules and defaults") {
  auto r = parse_kiln_config(R"({
    "services": {"db": {"kind": "postgres"}},
    "app": {"run": "node server.js", "services": ["db"], "idle_s": 0,
            "schedules": [{"name": "digest", "cron": "0 8 * * *", "run": "node jobs/digest.js"}]}})");
  REQUIRE_MESSAGE(r.has_value(), (r ? "" : r.error().message));
  REQUIRE(r->app.has_value());
  const auto& app = *r->app;
  CHECK(app.argv == std::vector<std::string>{"/bin/sh", "-c", "node server.js"});
  CHECK(app.display == "node server.js");
  CHECK(app.services == std::vector<std::string>{"db"});
  CHECK(app.idle_s == 0);
  CHECK(app.start_timeout_s == 30);
  REQUIRE(app.schedules.size() == 1);
  CHECK(app.schedules[0].name == "digest");
  CHECK(app.schedules[0].cron == "0 8 * * *");
  CHECK(app.schedules[0].argv == std::vector<std::string>{"/bin/sh", "-c", "node jobs/digest.js"});
  CHECK(app.schedules[0].timeout_s == 600);
  // What an app version stores reads back as the same configuration.
  auto back = kiln::server::app_config_from_json(kiln::server::to_json(app));
  REQUIRE(back);
  CHECK(back->argv == app.argv);
  CHECK(back->services == app.services);
  CHECK(back->idle_s == 0);
  REQUIRE(back->schedules.size() == 1);
  CHECK(back->schedules[0].cron == "0 8 * * *");

  auto none = parse_kiln_config(R"({"verify": []})");
  REQUIRE(none);
  CHECK_FALSE(none->app.has_value());
  auto minimal = parse_kiln_config(R"({"app": {"run": ["node", "server.js"]}})");
  REQUIRE(minimal);
  REQUIRE(minimal->app.has_value());
  CHECK(minimal->app->argv == std::vector<std::string>{"node", "server.js"});
  CHECK(minimal->app->idle_s == 300);
  CHECK(minimal->app->schedules.empty());
}

TEST_CASE("app mistakes name the path: an undeclared service, a schedule name twice, no run") {
  CHECK(error_of(R"({"app": {"run": "x", "services": ["db"]}})") ==
        R"(kiln.json: /app/services/0: no service named "db" in "services"; declare it there first)");
  CHECK(error_of(R"({"services": {"db": {"kind": "redis"}}, "app": {"run": "x", "services": ["db", "cache"]}})") ==
        R"(kiln.json: /app/services/1: no service named "cache" in "services"; declare it there first)");
  CHECK(error_of(R"({"app": {"run": "x", "schedules": [{"name": "a", "cron": "@daily", "run": "y"},
                                                          {"name": "a", "cron": "@hourly", "run": "z"}]}})") ==
        R"(kiln.json: /app/schedules/1/name: schedule name "a" is already used by /app/schedules/0)");
  const std::string no_run = error_of(R"({"app": {"services": []}})");
  CHECK(no_run.starts_with("kiln.json: /app"));
  CHECK(no_run.find("run") != std::string::npos);
}

TEST_CASE("app.network: none by default, an allowlist kept with the version, host refused, bad entries named") {
  auto plain = parse_kiln_config(R"({"app": {"run": "x"}})");
  REQUIRE(plain);
  CHECK(plain->app->network == "none");
  auto old = kiln::server::app_config_from_json(json{{"argv", {"x"}}});  // stored before app.network
  REQUIRE(old);
  CHECK(old->network == "none");

  auto r = parse_kiln_config(R"({"app": {"run": "x", "network":
      {"allow": ["api.example.com", "*.cdn.example.net:8443"], "deny": ["bad.example.com"], "allow_private": true}}})");
  REQUIRE_MESSAGE(r.has_value(), (r ? "" : r.error().message));
  CHECK(r->app->network["allow"] == json::array({"api.example.com", "*.cdn.example.net:8443"}));
  auto back = kiln::server::app_config_from_json(kiln::server::to_json(*r->app));
  REQUIRE(back);
  CHECK(back->network == r->app->network);
  auto loop = parse_kiln_config(R"({"app": {"run": "x", "network": "loopback"}})");
  REQUIRE(loop);
  CHECK(kiln::server::app_config_from_json(kiln::server::to_json(*loop->app))->network == "loopback");

  const std::string host = error_of(R"({"app": {"run": "x", "network": "host"}})");
  CHECK(host.starts_with(R"(kiln.json: /app/network: network "host" is refused for an app)"));
  CHECK(error_of(R"({"app": {"run": "x", "network": {"allow": ["exa mple.com"]}}})")
            .starts_with(R"(kiln.json: /app/network/allow/0: "exa mple.com" is not a host name)"));
  CHECK(error_of(R"({"app": {"run": "x", "network": {"allow": ["ok.example"], "deny": ["a.example", "10.0.0.0/99"]}}})") ==
        R"(kiln.json: /app/network/deny/1: "10.0.0.0/99" has a prefix length above 32)");
  CHECK(error_of(R"({"app": {"run": "x", "network": {"alow": []}}})").starts_with("kiln.json: /app/network"));
  CHECK(error_of(R"({"app": {"run": "x", "network": {"allow": [3]}}})").starts_with("kiln.json: /app/network/allow/0"));
  // sandbox.network still takes host (for sessions, where a person chose it).
  CHECK(parse_kiln_config(R"({"sandbox": {"network": "host"}})").has_value());
}
