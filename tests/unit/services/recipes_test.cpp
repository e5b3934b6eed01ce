// What each kind of service runs and what the other commands of its sandbox are told: values go to
// the scripts as positional parameters, and the connection variables follow TOOLS.md.
#include <doctest/doctest.h>

#include <algorithm>

#include "services/recipes.h"

using namespace kiln::services;
using kiln::server::ServiceConfig;
using kiln::server::ServiceKind;

namespace {

ServiceConfig svc(std::string name, ServiceKind kind, int port) {
  ServiceConfig s;
  s.name = std::move(name);
  s.kind = kind;
  s.port = port;
  return s;
}

}  // namespace

TEST_CASE("connection variables: the first postgres and redis get the plain names, every service its own") {
  auto db = svc("db", ServiceKind::postgres, 5432);
  auto audit = svc("audit-log", ServiceKind::postgres, 5433);
  auto cache = svc("cache", ServiceKind::redis, 6379);
  auto api = svc("api", ServiceKind::command, 3000);
  auto env = connection_env({&db, &audit, &cache, &api}, {{"db", "verify_1234abcd"}});
  CHECK(env["DATABASE_URL"] == "postgres://postgres@127.0.0.1:5432/verify_1234abcd");
  CHECK(env["PGHOST"] == "127.0.0.1");
  CHECK(env["PGPORT"] == "5432");
  CHECK(env["PGUSER"] == "postgres");
  CHECK(env["PGDATABASE"] == "verify_1234abcd");
  CHECK(env["AUDIT_LOG_DATABASE_URL"] == "postgres://postgres@127.0.0.1:5433/app");
  CHECK(env["KILN_SERVICE_AUDIT_LOG_URL"] == env["AUDIT_LOG_DATABASE_URL"]);
  CHECK(env["REDIS_URL"] == "redis://127.0.0.1:6379");
  CHECK(env["KILN_SERVICE_CACHE_URL"] == "redis://127.0.0.1:6379");
  CHECK(env["KILN_SERVICE_API_URL"] == "http://127.0.0.1:3000");
  CHECK(env_name("a-b_c") == "A_B_C");
}

TEST_CASE("scripts take their values as parameters, never in their text") {
  auto api = svc("api", ServiceKind::command, 3000);
  api.ready_path = "/health';rm -rf /;'";
  auto probe = probe_command(api, "", 42);
  REQUIRE(probe.size() == 7);
  CHECK(probe[0] == "/bin/bash");
  CHECK(probe[2].find("rm -rf") == std::string::npos);  // the script is fixed text
  CHECK(probe[4] == "42");
  CHECK(probe[5] == "3000");
  CHECK(probe[6] == api.ready_path);
  auto db = svc("db", ServiceKind::postgres, 5432);
  auto r = make_recipe(db, "/usr/lib/postgresql/15/bin");
  CHECK(r.start[0] == "/bin/sh");
  CHECK(r.start.back() == "5432");
  CHECK(std::find(r.start.begin(), r.start.end(), data_target("db")) != r.start.end());
  CHECK(r.url == "postgres://postgres@127.0.0.1:5432/app");
  auto cache = make_recipe(svc("cache", ServiceKind::redis, 6380), "/usr/bin/redis-server");
  CHECK(cache.start[0] == "/usr/bin/redis-server");
  CHECK(std::find(cache.start.begin(), cache.start.end(), "127.0.0.1") != cache.start.end());
  CHECK(cache.url == "redis://127.0.0.1:6380");
}
