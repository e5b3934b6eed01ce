// The lifecycle against the real kiln-sandbox helper, with command services (python3's HTTP server
// and a shell that exits): prepare adds what the sandbox needs, start waits for readiness, a
// crash shows as failed, restart counts, an early exit quotes the log, and a destroyed sandbox
// lets its services go. Skipped with the reason where no sandbox can start (failed under
// KILN_REQUIRE_SANDBOX=1).
#include <doctest/doctest.h>

#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "sandbox/manager.h"
#include "sandbox/policy.h"
#include "services/service_host.h"

#include "../skip.h"
#include "../temp_dir.h"

using namespace kiln;
using services::ServiceHost;
namespace fs = std::filesystem;

namespace {

// No REQUIRE in here: the probe also runs before main (skip()), outside any case.
struct Env {
  std::string base = make_base();
  std::string state = base + "/state", ws = base + "/ws";
  std::unique_ptr<sandbox::SandboxManager> m;
  std::unique_ptr<ServiceHost> host;
  std::string unavailable;
  Env() {
    fs::create_directories(state);
    fs::create_directories(ws);
    fs::permissions(ws, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                            fs::perms::others_read | fs::perms::others_exec);
    sandbox::ManagerOptions o;
    o.state_dir = state;
    o.helper_path = KILN_SANDBOX_HELPER;
    o.cleanup_stale = false;
    o.warm_spares = false;
    m = std::make_unique<sandbox::SandboxManager>(o);
    host = std::make_unique<ServiceHost>(*m, nullptr, state);
    auto p = policy();
    if (!p) {
      unavailable = p.error().message;
      return;
    }
    sandbox::ExecRequest r;
    r.argv = {"/bin/sh", "-c", "true"};
    r.cwd = ws;
    if (auto probe = m->exec({}, &*p, r); !probe) unavailable = probe.error().message;
  }
  ~Env() {
    host.reset();
    m.reset();
    std::error_code ec;
    fs::remove_all(base, ec);
  }
  static std::string make_base() {
    char tmpl[] = "/tmp/kiln-svc-host-test-XXXXXX";
    const char* made = ::mkdtemp(tmpl);
    return made ? made : "/tmp/kiln-svc-host-test-unmade";
  }
  Result<sandbox::SandboxPolicy> policy() {
    sandbox::PolicyInput in;
    in.workspace_root = ws;
    in.workspace_id = "ws_test";
    auto p = sandbox::make_policy(in);
    if (!p) return p;
    if (auto f = m->finalize_policy(*p); !f) return std::unexpected(f.error());
    return p;
  }
};

bool skip() {
  static const bool s = !test::sandbox_required() &&
                        test::skip_because("unit.services lifecycle cases (the sandbox helper cannot run here)",
                                           Env().unavailable);
  return s;
}

server::KilnConfig config_of(const char* text) {
  auto c = server::parse_kiln_config(text);
  REQUIRE_MESSAGE(c.has_value(), (c ? "" : c.error().message));
  return *c;
}

services::ServiceRequest request(const server::KilnConfig& c, std::vector<std::string> names, const std::string& ws) {
  services::ServiceRequest r;
  r.config = &c;
  r.names = std::move(names);
  r.workspace_id = "ws_test";
  r.workspace_root = ws;
  return r;
}

constexpr const char* kWeb = R"({"services": {"web": {"run": ["python3", "-m", "http.server", "3000", "--bind", "127.0.0.1"],
                                                       "port": 3000, "ready": "/"},
                                               "broken": {"run": "echo cannot bind >&2; exit 5", "port": 3001}}})";

}  // namespace

TEST_CASE("start, list, restart, a crash, and destroy" * doctest::skip(skip())) {
  Env e;
  REQUIRE_MESSAGE(e.unavailable.empty(), e.unavailable);
  auto cfg = config_of(kWeb);
  auto policy = e.policy();
  REQUIRE(policy);
  auto prepared = e.host->prepare(request(cfg, {"web"}, e.ws), *policy);
  REQUIRE_MESSAGE(prepared.has_value(), (prepared ? "" : prepared.error().message));
  CHECK(policy->hosts_services);
  CHECK(policy->env["KILN_SERVICE_WEB_URL"] == "http://127.0.0.1:3000");
  auto sb = e.m->create(*policy);
  REQUIRE(sb);
  auto started = e.host->start(*prepared, sb->sandbox_id, {});
  REQUIRE_MESSAGE(started.has_value(), (started ? "" : started.error().message));
  REQUIRE(started->size() == 1);
  CHECK((*started)[0].state == "ready");
  CHECK((*started)[0].pid > 0);

  // Another command of the sandbox reaches it on loopback.
  sandbox::ExecRequest get;
  get.argv = {"python3", "-c", "import os, urllib.request; print(urllib.request.urlopen(os.environ['KILN_SERVICE_WEB_URL']).status)"};
  get.cwd = e.ws;
  auto r = e.m->exec(sb->sandbox_id, nullptr, get);
  REQUIRE(r);
  CHECK(r->out.text == "200\n");

  auto again = e.host->restart("", sb->sandbox_id, "web", {});
  REQUIRE_MESSAGE(again.has_value(), (again ? "" : again.error().message));
  CHECK(again->state == "ready");
  CHECK(again->restarts == 1);
  CHECK_FALSE(e.host->restart("", sb->sandbox_id, "nope", {}).has_value());
  CHECK(e.host->list("someone-else", sb->sandbox_id).empty());  // another owner sees nothing

  // It dies: failed, with how.
  sandbox::ExecRequest kill;
  kill.argv = {"/bin/sh", "-c", "kill -9 " + std::to_string(again->pid)};
  kill.cwd = e.ws;
  REQUIRE(e.m->exec(sb->sandbox_id, nullptr, kill));
  std::string state;
  for (int i = 0; i < 100 && state != "failed"; ++i) {
    state = e.host->list("", sb->sandbox_id).at(0).state;
    if (state != "failed") std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  CHECK(state == "failed");
  CHECK(e.host->list("", sb->sandbox_id).at(0).error.find("signal 9") != std::string::npos);

  REQUIRE(e.m->destroy("", sb->sandbox_id));
  CHECK(e.host->list("", sb->sandbox_id).empty());
}

TEST_CASE("a service that exits before it is ready is an error quoting its output" * doctest::skip(skip())) {
  Env e;
  REQUIRE_MESSAGE(e.unavailable.empty(), e.unavailable);
  auto cfg = config_of(kWeb);
  auto policy = e.policy();
  REQUIRE(policy);
  auto prepared = e.host->prepare(request(cfg, {"broken"}, e.ws), *policy);
  REQUIRE(prepared);
  auto sb = e.m->create(*policy);
  REQUIRE(sb);
  auto started = e.host->start(*prepared, sb->sandbox_id, {});
  REQUIRE_FALSE(started);
  CHECK_MESSAGE(started.error().message.find("service broken (command) exited with code 5") != std::string::npos, started.error().message);
  CHECK(started.error().message.find("cannot bind") != std::string::npos);
  CHECK(e.host->list("", sb->sandbox_id).at(0).state == "failed");
  (void)e.m->destroy("", sb->sandbox_id);
}

TEST_CASE("unknown names are refused before anything is locked or started") {
  test::TempDir state("kiln-svc-host-test");
  sandbox::ManagerOptions o;
  o.state_dir = state.path;
  o.helper_path = "/nonexistent/kiln-sandbox";
  o.warm_spares = false;
  o.cleanup_stale = false;
  sandbox::SandboxManager m(o);
  ServiceHost host(m, nullptr, state.path);
  auto cfg = config_of(kWeb);
  sandbox::SandboxPolicy p;
  auto r = host.prepare(request(cfg, {"nope"}, "/tmp"), p);
  REQUIRE_FALSE(r);
  CHECK(r.error().message.find("no service named 'nope' in kiln.json; its services are: broken, web") != std::string::npos);
  CHECK_FALSE(p.hosts_services);
  services::ServiceRequest none;
  none.names = {"db"};
  CHECK_FALSE(host.prepare(none, p).has_value());
}
