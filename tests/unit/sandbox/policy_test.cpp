// Policy merging, environment filtering, workspace refusal and the helper spec.
#include <doctest/doctest.h>

#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <set>
#include <sys/stat.h>
#include <unistd.h>

#include "sandbox/policy.h"

using namespace kiln::sandbox;
using nlohmann::json;

TEST_CASE("call arguments override kiln.json per limit and per variable; secrets are a union") {
  PolicyInput in;
  in.config_sandbox = json{{"network", "loopback"}, {"limits", {{"wall_s", 600}, {"memory_mb", 2048}}},
                           {"env", {{"CI", "1"}, {"A", "cfg"}}}, {"secrets", {"NPM_TOKEN"}}};
  in.args = json{{"limits", {{"memory_mb", 512}}}, {"env", {{"A", "call"}}}, {"secrets", {"GH_TOKEN", "NPM_TOKEN"}}};
  in.workspace_root = "/work/ws";
  auto p = make_policy(in);
  REQUIRE(p);
  CHECK(p->network == Network::loopback);
  CHECK(*p->requested.wall_s == 600);
  CHECK(*p->requested.memory_mb == 512);
  CHECK(p->env.at("CI") == "1");
  CHECK(p->env.at("A") == "call");
  CHECK(p->secrets == std::vector<std::string>{"NPM_TOKEN", "GH_TOKEN"});
}

TEST_CASE("bad values are refused with their name") {
  PolicyInput in;
  in.args = json{{"limits", {{"memory_mb", -1}}}};
  auto p = make_policy(in);
  REQUIRE(!p);
  CHECK(p.error().message.find("memory_mb") != std::string::npos);
  in.args = json{{"limits", {{"bogus", 1}}}};
  CHECK(!make_policy(in));
  in.args = json{{"network", "internet"}};
  CHECK(!make_policy(in));
  in.args = json{{"env", {{"BAD NAME", "x"}}}};
  CHECK(!make_policy(in));
  in.args = json{{"secrets", {"not-a-name"}}};
  CHECK(!make_policy(in));
}

TEST_CASE("defaults fill what was not asked for; memory and pids defaults only where something enforces them") {
  Limits l;
  apply_default_limits(l, false, false);
  CHECK(*l.wall_s == 600);
  CHECK(*l.output_bytes == 64ull << 20);
  CHECK(!l.memory_mb);
  CHECK(!l.pids);
  Limits c;
  apply_default_limits(c, true, true);
  CHECK(*c.memory_mb == 2048);
  CHECK(*c.pids == 1024);
}

TEST_CASE("the sandbox environment holds only the safe base, env and secrets") {
  ::setenv("KILN_TEST_HOST_SECRET", "leak", 1);
  ::setenv("AWS_SECRET_ACCESS_KEY", "leak", 1);
  SandboxPolicy p;
  p.env = {{"CI", "1"}};
  auto env = sandbox_env(p, {{"NPM_TOKEN", "tok"}});
  CHECK(env.at("PATH") == kSafePath);
  CHECK(env.at("HOME") == "/tmp/home");
  CHECK(env.contains("LANG"));
  CHECK(env.contains("TERM"));
  CHECK(env.at("CI") == "1");
  CHECK(env.at("NPM_TOKEN") == "tok");
  CHECK(env.size() == 6);
  CHECK(!env.contains("KILN_TEST_HOST_SECRET"));
  CHECK(!env.contains("AWS_SECRET_ACCESS_KEY"));
}

TEST_CASE("the helper spec binds system folders read-only, never /etc as a whole or homes") {
  SandboxPolicy p;
  p.workspace_root = "/work/ws";
  auto spec = helper_spec(p, "sb_x", {"/sys/fs/cgroup/memory/kiln/sb_x"});
  CHECK(spec["workspace"] == "/work/ws");
  CHECK(spec["network"] == "none");
  CHECK(spec["cgroups"][0] == "/sys/fs/cgroup/memory/kiln/sb_x");
  bool has_usr = false;
  for (const auto& b : spec["ro_binds"]) {
    std::string s = b;
    CHECK(s != "/etc");
    CHECK(s != "/etc/shadow");
    CHECK(!s.starts_with("/home"));
    CHECK(!s.starts_with("/root"));
    has_usr |= s == "/usr";
  }
  CHECK(has_usr);
  // Only the fields the helper's strict parser knows.
  for (const auto& [k, v] : spec.items()) {
    static const std::set<std::string> known = {"id", "workspace", "workspace_writable", "ro_binds", "data_binds",
                                                "network", "hostname", "tmp_size_mb", "uid", "gid", "cgroups", "seccomp", "landlock"};
    CHECK(known.contains(k));
  }
}

TEST_CASE("workspaces that would expose the host, a home or the state dir are refused") {
  CHECK(!check_workspace_root("/", "/var/kiln"));
  CHECK(!check_workspace_root("/var", "/var/kiln/state"));
  ::setenv("HOME", "/home/someone", 1);
  CHECK(!check_workspace_root("/home/someone", ""));
  CHECK(!check_workspace_root("/home", ""));
  CHECK(check_workspace_root("/home/someone/project", "/home/someone/.local/state/kiln"));
}

TEST_CASE("the host's own folders are never a workspace (a root-run sandbox would rewrite the system)") {
  for (const char* sys : {"/etc", "/etc/nginx", "/usr", "/usr/lib/x", "/boot", "/var/lib/postgresql", "/var/log",
                          "/run/user", "/proc/1", "/root/project"}) {
    auto r = check_workspace_root(sys, "");
    CHECK_MESSAGE(!r, sys);
    if (!r) CHECK(r.error().message.find("system folder") != std::string::npos);
  }
  CHECK(check_workspace_root("/var/www/site", ""));
  CHECK(check_workspace_root("/srv/app", ""));
  CHECK(check_workspace_root("/tmp/proj", ""));
  CHECK(check_workspace_root("/var/tmp/proj", ""));
}

TEST_CASE("a workspace is refused where kiln would mount a folder the checks did not see") {
  // workspace_identity opens without following links: a link anywhere in the path is an error.
  char tmpl[] = "/tmp/kiln-ident-XXXXXX";
  REQUIRE(::mkdtemp(tmpl) != nullptr);
  std::string dir = tmpl;
  REQUIRE(::mkdir((dir + "/real").c_str(), 0755) == 0);
  REQUIRE(::symlink("real", (dir + "/link").c_str()) == 0);
  auto a = workspace_identity(dir + "/real");
  REQUIRE(a);
  CHECK_FALSE(workspace_identity(dir + "/link"));
  struct stat st {};
  REQUIRE(::stat((dir + "/real").c_str(), &st) == 0);
  CHECK(a->ino == std::uint64_t(st.st_ino));
  ::unlink((dir + "/link").c_str());
  ::rmdir((dir + "/real").c_str());
  ::rmdir(dir.c_str());
}

TEST_CASE("a workspace that is, holds or lies in the state dir is refused, whatever name reaches it") {
  namespace fs = std::filesystem;
  char tmpl[] = "/tmp/kiln-policy-XXXXXX";
  REQUIRE(::mkdtemp(tmpl));
  const fs::path base = tmpl;
  const fs::path state = base / "state";
  fs::create_directories(state / "secrets");
  fs::create_directories(state / "workspaces" / "named");
  fs::create_directories(base / "project");
  fs::create_symlink(state / "secrets", base / "alias");
  CHECK(!check_workspace_root(state.string(), state.string()));
  CHECK(!check_workspace_root((state / "secrets").string(), state.string()));
  CHECK(!check_workspace_root((base / "alias").string(), state.string()));  // a symlink's other name
  CHECK(!check_workspace_root(base.string(), state.string()));
  CHECK(check_workspace_root((state / "workspaces" / "named").string(), state.string()));
  CHECK(check_workspace_root((base / "project").string(), state.string()));
  fs::remove_all(base);
}

TEST_CASE("a sandbox that hosts services gets its loopback, its data folders, and ids postgres accepts") {
  kiln::sandbox::SandboxPolicy p;
  p.workspace_root = "/srv/project";
  p.network = kiln::sandbox::Network::none;
  json plain = kiln::sandbox::helper_spec(p, "sb_1", {});
  CHECK(plain["network"] == "none");
  CHECK(plain["data_binds"].empty());
  CHECK(plain["uid"] == long(::getuid()));
  p.hosts_services = true;
  p.data_binds.push_back({"/state/services/ws_1/db/dev", "/var/lib/kiln/services/db", 7, 9});
  json s = kiln::sandbox::helper_spec(p, "sb_1", {});
  CHECK(s["network"] == "loopback");  // services need 127.0.0.1 even with network none
  REQUIRE(s["data_binds"].size() == 1);
  CHECK(s["data_binds"][0] == json{{"source", "/state/services/ws_1/db/dev"},
                                   {"target", "/var/lib/kiln/services/db"}, {"dev", 7}, {"ino", 9}});
  // postgres and initdb refuse uid 0: with Kiln run as root the ids inside are nobody's.
  const long expect = ::getuid() == 0 ? kiln::sandbox::kServiceIdForRoot : long(::getuid());
  CHECK(s["uid"] == expect);
  p.network = kiln::sandbox::Network::host;
  CHECK(kiln::sandbox::helper_spec(p, "sb_1", {})["network"] == "host");
}
