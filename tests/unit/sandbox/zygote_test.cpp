// The forking helper (HELPER_PROTOCOL.md, "Zygote"): helpers are the zygote's children, held by
// pidfd; a malformed request is refused without harm; kiln falls back to exec'ing the helper when
// the zygote cannot be had; a killed zygote takes its sandboxes along and the next one starts anew.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "core/unique_fd.h"
#include "sandbox/helper_link.h"
#include "sandbox/helper_zygote.h"
#include "sandbox/spawn.h"

#include "../skip.h"
#include "sandbox_env.h"

using namespace kiln::sandbox;
using kiln::UniqueFd;
using kiln::sandbox::test::Env;
using kiln::sandbox::test::sandbox_skip;
namespace fs = std::filesystem;

namespace {

// Field 4 of /proc/<pid>/stat (the parent), or -1.
pid_t parent_of(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string s((std::istreambuf_iterator<char>(f)), {});
  auto close = s.rfind(')');
  if (close == std::string::npos) return -1;
  char state = 0;
  int ppid = -1;
  if (std::sscanf(s.c_str() + close + 1, " %c %d", &state, &ppid) != 2) return -1;
  return ppid;
}

// Our children whose command line names the zygote.
std::vector<pid_t> zygotes_of(pid_t parent) {
  std::vector<pid_t> out;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    pid_t pid = std::stoi(name);
    if (parent_of(pid) != parent) continue;
    std::ifstream f(e.path() / "cmdline");
    std::string cmd((std::istreambuf_iterator<char>(f)), {});
    if (cmd.find("--zygote") != std::string::npos) out.push_back(pid);
  }
  return out;
}

bool wait_readable(int fd, int ms) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, ms) == 1;
}

struct RawZygote {
  UniqueFd sock;
  pid_t pid = -1;
  RawZygote() {
    int sp[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) == 0);
    sock.reset(sp[0]);
    UniqueFd theirs(sp[1]);
    SpawnSpec s;
    s.path = KILN_SANDBOX_HELPER;
    s.argv = {s.path, "--zygote", "3"};
    s.fds = {{3, theirs.get()}};
    auto p = spawn_process(s);
    REQUIRE(p.has_value());
    pid = *p;
  }
  ~RawZygote() {
    sock.reset();
    int st;
    // Not waitpid(-1): that waits for any child of the test process, such as another test's zygote.
    if (pid > 0) ::waitpid(pid, &st, 0);
  }
  void send(const char* word, const std::vector<int>& fds) { REQUIRE(send_message(sock.get(), word, fds)); }
  // The reply's text, and its fd (if any) in `fd`.
  std::string receive(UniqueFd& fd) {
    REQUIRE(wait_readable(sock.get(), 10000));
    std::string text;
    std::vector<UniqueFd> fds;
    REQUIRE(recv_control(sock.get(), text, fds) == 1);
    if (!fds.empty()) fd = std::move(fds.front());
    return text;
  }
};

}  // namespace

TEST_CASE("zygote: says ready with its pid, refuses malformed requests and keeps serving, exits on close") {
  RawZygote z;
  UniqueFd none;
  CHECK(z.receive(none) == std::to_string(z.pid));
  CHECK_FALSE(none);

  int p1[2], p2[2], p3[2];
  REQUIRE(::pipe2(p1, O_CLOEXEC) == 0);
  REQUIRE(::pipe2(p2, O_CLOEXEC) == 0);
  REQUIRE(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, p3) == 0);
  UniqueFd spec_r(p1[0]), spec_w(p1[1]), status_r(p2[0]), status_w(p2[1]), ctl(p3[0]), ctl_theirs(p3[1]);

  // Two fds, four fds, a wrong word: each refused, nothing forked, the fds closed there.
  z.send("spawn", {spec_r.get(), status_w.get()});
  CHECK(z.receive(none) == "error");
  z.send("spawn", {spec_r.get(), status_w.get(), ctl_theirs.get(), spec_r.get()});
  CHECK(z.receive(none) == "error");
  z.send("spawnx", {spec_r.get(), status_w.get(), ctl_theirs.get()});
  CHECK(z.receive(none) == "error");
  z.send("spawn", {});
  CHECK(z.receive(none) == "error");
  CHECK(zygotes_of(z.pid).empty());

  // A well-formed one: a child of the zygote (not ours), held by the attached pidfd. An invalid
  // spec makes it fail step "spec" on the status pipe and exit 125.
  z.send("spawn", {spec_r.get(), status_w.get(), ctl_theirs.get()});
  UniqueFd pidfd;
  std::string pid_text = z.receive(pidfd);
  REQUIRE(pidfd);
  pid_t child = std::stoi(pid_text);
  CHECK(parent_of(child) == z.pid);
  status_w.reset();
  spec_r.reset();
  ctl_theirs.reset();
  REQUIRE(::write(spec_w.get(), "{\"bogus\":1}", 11) == 11);
  spec_w.reset();
  std::string status;
  char buf[4096];
  for (ssize_t n; (n = ::read(status_r.get(), buf, sizeof buf)) > 0;) status.append(buf, std::size_t(n));
  CHECK(status.find("\"step\":\"spec\"") != std::string::npos);
  CHECK(status.find("\"ok\":false") != std::string::npos);
  REQUIRE(wait_readable(pidfd.get(), 10000));
  if (auto st = pidfd_exit_status(pidfd.get())) {
    CHECK(WIFEXITED(*st));
    CHECK(WEXITSTATUS(*st) == 125);
  } else {
    MESSAGE("this kernel has no PIDFD_INFO_EXIT (Linux 6.15+): the exit status was not checked");
  }
  // Reaped by the kernel (SA_NOCLDWAIT): no zombie left under the zygote.
  for (int i = 0; i < 100 && fs::exists("/proc/" + pid_text); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CHECK_FALSE(fs::exists("/proc/" + pid_text));

  // Closing our end ends it.
  z.sock.reset();
  int st = 0;
  REQUIRE(::waitpid(z.pid, &st, 0) == z.pid);
  CHECK(WIFEXITED(st));
  CHECK(WEXITSTATUS(st) == 0);
  z.pid = -1;
}

TEST_CASE("zygote: a child forked just before the zygote dies never outlives it") {
  // The death signal is not inherited across fork: a child whose zygote died before it armed its
  // own was left to init, blocked on its spec (11 of 300 rounds before the child checked its parent).
  int survivors = 0;
  for (int round = 0; round < 150; ++round) {
    RawZygote z;
    UniqueFd none;
    REQUIRE(z.receive(none) == std::to_string(z.pid));
    int p1[2], p2[2], p3[2];
    REQUIRE(::pipe2(p1, O_CLOEXEC) == 0);
    REQUIRE(::pipe2(p2, O_CLOEXEC) == 0);
    REQUIRE(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, p3) == 0);
    UniqueFd spec_r(p1[0]), spec_w(p1[1]), status_r(p2[0]), status_w(p2[1]), ctl(p3[0]), ctl_theirs(p3[1]);
    z.send("spawn", {spec_r.get(), status_w.get(), ctl_theirs.get()});
    UniqueFd pidfd;
    z.receive(pidfd);
    REQUIRE(pidfd);
    ::kill(z.pid, SIGKILL);
    // spec_w stays open: a surviving child would block on its spec for ever.
    if (!wait_readable(pidfd.get(), 5000)) ++survivors;
    ::syscall(SYS_pidfd_send_signal, pidfd.get(), SIGKILL, nullptr, 0);
  }
  CHECK(survivors == 0);
}

TEST_CASE("zygote: a program that is not one (an older helper) is not used, and says so by nullopt") {
  HelperZygote z("/bin/true");
  int p[2];
  REQUIRE(::pipe2(p, O_CLOEXEC) == 0);
  UniqueFd a(p[0]), b(p[1]);
  for (int i = 0; i < 4; ++i) {
    bool sent = true;
    CHECK_FALSE(z.spawn(a.get(), b.get(), a.get(), sent).has_value());
    CHECK_FALSE(sent);  // nothing went out: the caller may exec with the same fds
  }
  CHECK(zygotes_of(::getpid()).empty());
}

TEST_CASE("zygote: helpers are its children with /dev/null stdio; killed, it takes its sandboxes along and "
          "the next sandbox gets a new one" * doctest::skip(sandbox_skip())) {
  Env e;
  REQUIRE_SANDBOX(e);
  auto zs = zygotes_of(::getpid());
  REQUIRE(zs.size() == 1);
  const pid_t zygote = zs[0];

  auto info = e.m->create(e.policy());
  REQUIRE(info.has_value());
  auto first = e.exec("echo one", {}, info->sandbox_id);
  REQUIRE(first.has_value());
  CHECK(first->out.text == "one\n");
  // The session's helper: a child of the zygote whose stdin and stdout are /dev/null (never the
  // server's own stdio, which is the MCP stream).
  std::vector<pid_t> helpers;
  for (const auto& d : fs::directory_iterator("/proc")) {
    const std::string name = d.path().filename();
    if (name.find_first_not_of("0123456789") == std::string::npos && parent_of(std::stoi(name)) == zygote)
      helpers.push_back(std::stoi(name));
  }
  REQUIRE_FALSE(helpers.empty());
  for (pid_t h : helpers) {
    std::error_code ec;
    CHECK(fs::read_symlink("/proc/" + std::to_string(h) + "/fd/0", ec) == "/dev/null");
    CHECK(fs::read_symlink("/proc/" + std::to_string(h) + "/fd/1", ec) == "/dev/null");
  }

  REQUIRE(::kill(zygote, SIGKILL) == 0);
  // Reaped while idle (within the keeper's 5 s check), not left a zombie until the next sandbox.
  for (int i = 0; i < 800 && fs::exists("/proc/" + std::to_string(zygote)); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CHECK_FALSE(fs::exists("/proc/" + std::to_string(zygote)));
  // Its helpers die with it (their death signal): the session sandbox is gone, not left running
  // unwatched.
  for (pid_t h : helpers) {
    for (int i = 0; i < 500 && fs::exists("/proc/" + std::to_string(h)); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    CHECK_FALSE(fs::exists("/proc/" + std::to_string(h)));
  }
  auto after = e.exec("echo two", {}, info->sandbox_id);
  CHECK((!after.has_value() || after->stop_reason != StopReason::exit));

  // A fresh sandbox still works: the next request starts a new zygote.
  auto fresh = e.exec("echo three");
  REQUIRE(fresh.has_value());
  CHECK(fresh->out.text == "three\n");
  CHECK(fresh->exit_code == 0);
}
