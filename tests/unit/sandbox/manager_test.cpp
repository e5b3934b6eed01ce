// The sandbox engine against the real kiln-sandbox helper: fresh and session execs, timeouts
// that kill a whole tree, output caps, background runs with stdin and long-poll output, and
// destroy cleanup. Skipped (doctest::skip, with the reason on stderr) where the helper cannot build a
// sandbox, unless KILN_REQUIRE_SANDBOX=1: then they run and fail with that reason.
#include <doctest/doctest.h>

#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>
#include <vector>

#include "sandbox/manager.h"
#include "sandbox/policy.h"

#include "../skip.h"
#include "sandbox_env.h"

using namespace kiln::sandbox;
namespace fs = std::filesystem;

using kiln::sandbox::test::Env;
using kiln::sandbox::test::sandbox_skip;

TEST_CASE("fresh exec: exit code, stdout, stderr, isolation report" * doctest::skip(sandbox_skip())) {
  Env e;
  REQUIRE_SANDBOX(e);
  auto r = e.exec("echo out; echo err >&2; exit 3");
  REQUIRE(r);
  CHECK(r->exit_code == 3);
  CHECK(r->stop_reason == StopReason::exit);
  CHECK(r->out.text == "out\n");
  CHECK(r->err.text == "err\n");
  CHECK(!r->out.truncated);
  CHECK(r->isolation["level"] == "strict");
  CHECK(fs::exists(r->run_dir + "/stdout"));
  // A stream that stayed empty leaves no file (and a silent run no folder).
  auto quiet = e.exec("echo only-out");
  REQUIRE(quiet);
  CHECK(fs::exists(quiet->run_dir + "/stdout"));
  CHECK_FALSE(fs::exists(quiet->run_dir + "/stderr"));
  auto silent = e.exec("true");
  REQUIRE(silent);
  CHECK(silent->exit_code == 0);
  CHECK_FALSE(fs::exists(silent->run_dir));
}

TEST_CASE("host environment does not leak; HOME is inside the sandbox" * doctest::skip(sandbox_skip())) {
  ::setenv("KILN_LEAK_CHECK", "visible", 1);
  Env e;
  REQUIRE_SANDBOX(e);
  auto r = e.exec("echo \"[$KILN_LEAK_CHECK] $HOME\"; test -d \"$HOME\" && echo home-ok");
  REQUIRE(r);
  CHECK(r->out.text == "[] /tmp/home\nhome-ok\n");
}

TEST_CASE("wall timeout kills a tree that ignores TERM and escaped with setsid" * doctest::skip(sandbox_skip())) {
  Env e;
  REQUIRE_SANDBOX(e);
  auto t0 = std::chrono::steady_clock::now();
  auto r = e.exec("trap '' TERM; setsid sh -c 'trap \"\" TERM; sleep 100' & (sleep 100 &) ; sleep 100", {}, {}, 0.5);
  REQUIRE(r);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
  CHECK(r->stop_reason == StopReason::timeout);
  CHECK(ms < 3000);
}

TEST_CASE("output cap stops the command and says truncated with the total" * doctest::skip(sandbox_skip())) {
  Env e;
  REQUIRE_SANDBOX(e);
  auto r = e.exec("yes 0123456789", {{"limits", {{"output_bytes", 100000}}}});
  REQUIRE(r);
  CHECK(r->stop_reason == StopReason::output_limit);
  CHECK(r->out.truncated);
  CHECK(r->out.total_bytes == 100000);
  CHECK(r->out.dropped_bytes > 0);
  CHECK(r->out.text.size() <= 16 * 1024);
}

TEST_CASE("session: /tmp persists, background process reachable, stdin, long-poll, kill, destroy" * doctest::skip(sandbox_skip())) {
  Env e;
  REQUIRE_SANDBOX(e);
  auto sb = e.m->create(e.policy());
  REQUIRE(sb);
  auto a = e.exec("echo hello > /tmp/x", {}, sb->sandbox_id);
  REQUIRE(a);
  auto b = e.exec("cat /tmp/x", {}, sb->sandbox_id);
  REQUIRE(b);
  CHECK(b->out.text == "hello\n");

  ExecRequest bg;
  bg.argv = {"/bin/sh", "-c", "while read l; do echo \"got $l\"; done; echo bye"};
  bg.cwd = e.ws;
  auto started = e.m->start(sb->sandbox_id, nullptr, bg);
  REQUIRE(started);
  CHECK(started->pid > 0);
  REQUIRE(e.m->input("", started->run_id, "one\n", false));
  auto page = e.m->output("", started->run_id, Stream::stdout_, 0, 1000, 3000);
  REQUIRE(page);
  CHECK(page->data == "got one\n");
  CHECK(page->running);
  REQUIRE(e.m->input("", started->run_id, "two\n", true));
  std::string all;
  std::uint64_t off = 0;
  for (int i = 0; i < 50; ++i) {
    auto p = e.m->output("", started->run_id, Stream::stdout_, off, 1000, 200);
    REQUIRE(p);
    all += p->data;
    off = p->next_offset;
    if (p->eof) break;
  }
  CHECK(all == "got one\ngot two\nbye\n");

  ExecRequest sleeper;
  sleeper.argv = {"sleep", "100"};
  sleeper.cwd = e.ws;
  auto s = e.m->start(sb->sandbox_id, nullptr, sleeper);
  REQUIRE(s);
  auto k = e.m->kill("", s->run_id, SIGKILL);
  REQUIRE(k);
  REQUIRE(k->has_value());
  CHECK(**k == StopReason::killed);

  auto s2 = e.m->start(sb->sandbox_id, nullptr, sleeper);
  REQUIRE(s2);
  auto c = e.m->destroy("", sb->sandbox_id);
  REQUIRE(c);
  CHECK(c->leftovers.empty());
  CHECK(c->processes_killed.size() == 1);
  CHECK(e.m->list("").empty());
}

TEST_CASE("another owner's sandbox and run ids answer exactly as unknown ones do (case 33)" * doctest::skip(sandbox_skip())) {
  Env e;
  REQUIRE_SANDBOX(e);
  auto p = e.policy();
  p.owner = "alice";
  auto sb = e.m->create(p);
  REQUIRE(sb);
  ExecRequest sleeper;
  sleeper.owner = "alice";
  sleeper.argv = {"sleep", "100"};
  sleeper.cwd = e.ws;
  auto run = e.m->start(sb->sandbox_id, nullptr, sleeper);
  REQUIRE(run);
  // The message names the id it was given, so an unknown id of the same shape is the control.
  auto same_shape = [](std::string id) {
    for (std::size_t i = id.find('_') + 1; i < id.size(); ++i) id[i] = id[i] == '0' ? '1' : '0';
    return id;
  };
  auto rename = [](std::string text, const std::string& from, const std::string& to) {
    for (auto at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) text.replace(at, from.size(), to);
    return text;
  };
  const std::string ghost_sb = same_shape(sb->sandbox_id), ghost_run = same_shape(run->run_id);
  ExecRequest probe = sleeper;
  probe.owner = "bob";
  auto theirs = e.m->exec(sb->sandbox_id, nullptr, probe);
  auto missing = e.m->exec(ghost_sb, nullptr, probe);
  REQUIRE_FALSE(theirs);
  REQUIRE_FALSE(missing);
  CHECK(theirs.error().code == missing.error().code);
  CHECK(theirs.error().message == rename(missing.error().message, ghost_sb, sb->sandbox_id));
  auto out_theirs = e.m->output("bob", run->run_id, Stream::stdout_, 0, 100, 0);
  auto out_missing = e.m->output("bob", ghost_run, Stream::stdout_, 0, 100, 0);
  REQUIRE_FALSE(out_theirs);
  CHECK(out_theirs.error().message == rename(out_missing.error().message, ghost_run, run->run_id));
  auto in_theirs = e.m->input("bob", run->run_id, "x", false);
  REQUIRE_FALSE(in_theirs);
  CHECK(in_theirs.error().message == rename(e.m->input("bob", ghost_run, "x", false).error().message, ghost_run, run->run_id));
  auto kill_theirs = e.m->kill("bob", run->run_id, SIGKILL);
  REQUIRE_FALSE(kill_theirs);
  CHECK(kill_theirs.error().message == rename(e.m->kill("bob", ghost_run, SIGKILL).error().message, ghost_run, run->run_id));
  auto destroy_theirs = e.m->destroy("bob", sb->sandbox_id);
  REQUIRE_FALSE(destroy_theirs);
  CHECK(destroy_theirs.error().message == rename(e.m->destroy("bob", ghost_sb).error().message, ghost_sb, sb->sandbox_id));
  CHECK_FALSE(e.m->policy_of("bob", sb->sandbox_id).has_value());
  CHECK(e.m->list("bob").empty());
  // Nothing of alice's was touched: her sandbox and her run are still there.
  CHECK(e.m->list("alice").size() == 1);
  auto page = e.m->output("alice", run->run_id, Stream::stdout_, 0, 100, 0);
  REQUIRE(page);
  CHECK(page->running);
  REQUIRE(e.m->destroy("alice", sb->sandbox_id));
}

TEST_CASE("isolation none is refused without --allow-unsandboxed and loud with it") {
  Env e;
  SandboxPolicy p;
  p.isolation = Isolation::none;
  auto r = e.m->finalize_policy(p);
  REQUIRE(!r);
  CHECK(r.error().message.find("--allow-unsandboxed") != std::string::npos);

  Env u(true);
  auto res = u.exec("echo plain; echo \"[$KILN_LEAK_CHECK]\"", {{"isolation", "none"}});
  REQUIRE(res);
  CHECK(res->isolation["level"] == "none");
  CHECK(!res->warning.empty());
  CHECK(res->out.text == "plain\n[]\n");
  auto t = u.exec("sleep 100 & sleep 100", {{"isolation", "none"}}, {}, 0.3);
  REQUIRE(t);
  CHECK(t->stop_reason == StopReason::timeout);
}

namespace {

// Processes below this one (pid -> comm), from /proc.
std::map<pid_t, std::string> descendants_of_self() {
  std::map<pid_t, pid_t> parent;
  std::map<pid_t, std::string> comm;
  for (const auto& d : fs::directory_iterator("/proc")) {
    const std::string name = d.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream f(d.path() / "stat");
    std::string stat((std::istreambuf_iterator<char>(f)), {});
    const auto open = stat.find('('), close = stat.rfind(')');
    if (open == std::string::npos || close == std::string::npos) continue;
    pid_t pid = std::stoi(name);
    comm[pid] = stat.substr(open + 1, close - open - 1);
    parent[pid] = std::atoi(stat.c_str() + close + 4);  // ") S PPID"
  }
  std::map<pid_t, std::string> out;
  for (const auto& [pid, c] : comm)
    for (pid_t p = parent[pid]; p > 1; p = parent.count(p) ? parent[p] : 0)
      if (p == ::getpid()) {
        out[pid] = c;
        break;
      }
  return out;
}

bool spare_waiting() {
  for (const auto& [pid, c] : descendants_of_self())
    if (c == "kiln-spare") return true;
  return false;
}

}  // namespace

// An idle warm spare cannot be addressed by id, not even by the manager's own destroy(): shutdown
// must still take the spares along, or their helpers (and the zygote) outlive the manager.
TEST_CASE("shutdown takes the idle warm spares along: nothing of the manager is left" * doctest::skip(sandbox_skip())) {
  Env e;
  REQUIRE_SANDBOX(e);
  REQUIRE(e.exec("true"));
  bool spare = false;
  for (int i = 0; i < 200 && !(spare = spare_waiting()); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  REQUIRE_MESSAGE(spare, "no warm spare was built after a fresh exec");
  e.m.reset();
  std::map<pid_t, std::string> left;
  for (int i = 0; i < 100 && !(left = descendants_of_self()).empty(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  std::string names;
  for (const auto& [pid, c] : left) names += std::to_string(pid) + " " + c + "; ";
  CHECK_MESSAGE(left.empty(), "left after the manager was destroyed: " << names);
  // Nor their cgroups (named sb_ID.oPID-START, PID this process), which only the next start would remove.
  const std::string mine = ".o" + std::to_string(::getpid()) + "-";
  std::string groups;
  std::error_code ec;
  for (fs::recursive_directory_iterator it("/sys/fs/cgroup", fs::directory_options::skip_permission_denied, ec), end;
       !ec && it != end; it.increment(ec)) {
    if (it.depth() > 3) it.disable_recursion_pending();
    if (it->path().filename().string().find(mine) != std::string::npos) groups += it->path().string() + "; ";
  }
  CHECK_MESSAGE(groups.empty(), "cgroups left after the manager was destroyed: " << groups);
}
