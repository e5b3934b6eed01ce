// SandboxManager::connect against the real helper: kiln (outside) reaches a server listening on
// the sandbox's own 127.0.0.1 through pid 1, for one connection and for 200 at once; a dead port,
// another owner's sandbox and a destroyed one fail cleanly. Also the read-only workspace.
// Skipped like manager_test.cpp where no sandbox can start (unless KILN_REQUIRE_SANDBOX=1).
#include <doctest/doctest.h>

#include <dirent.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <thread>
#include <vector>

#include "sandbox_env.h"

using namespace kiln::sandbox;
using kiln::UniqueFd;
using kiln::sandbox::test::Env;
using kiln::sandbox::test::sandbox_skip;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

constexpr int kPort = 18080;

// An echo server on 127.0.0.1:kPort inside; prints "ready" once it listens.
const char* const kEchoServer = R"(
import socket, threading
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('127.0.0.1', 18080))
s.listen(512)
print('ready', flush=True)
def echo(c):
    while True:
        d = c.recv(65536)
        if not d:
            break
        c.sendall(d)
    c.close()
while True:
    c, _ = s.accept()
    threading.Thread(target=echo, args=(c,), daemon=True).start()
)";

struct Session {
  Env& e;
  std::string owner = "alice";
  std::string id;
  std::string server_run;
  Session(Env& env, bool hosts_services, bool start_server) : e(env) {
    auto p = e.policy();
    p.owner = owner;
    p.hosts_services = hosts_services;
    auto sb = e.m->create(p);
    REQUIRE_MESSAGE(sb.has_value(), (sb ? "" : sb.error().message));
    id = sb->sandbox_id;
    if (!start_server) return;
    ExecRequest r;
    r.owner = owner;
    r.argv = {"/usr/bin/python3", "-c", kEchoServer};
    r.cwd = e.ws;
    r.background = true;
    r.long_lived = true;
    auto run = e.m->start(id, nullptr, r);
    REQUIRE_MESSAGE(run.has_value(), (run ? "" : run.error().message));
    server_run = run->run_id;
    std::string seen;
    for (int i = 0; i < 100 && seen.find("ready") == std::string::npos; ++i) {
      auto page = e.m->output(owner, server_run, Stream::both, 0, 4096, 200);
      REQUIRE(page);
      seen = page->data;
      if (!page->running) break;
    }
    REQUIRE_MESSAGE(seen.find("ready") != std::string::npos, "the echo server did not start: " << seen);
  }
  ~Session() { (void)e.m->destroy(owner, id); }
};

// Waits (bounded) for a connecting socket to finish; returns SO_ERROR (0: connected).
int finish_connect(int fd) {
  pollfd p{fd, POLLOUT, 0};
  if (::poll(&p, 1, 10000) != 1) return ETIMEDOUT;
  int err = 0;
  socklen_t len = sizeof err;
  ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
  return err;
}

std::string echo_round_trip(int fd, const std::string& text) {
  if (::send(fd, text.data(), text.size(), MSG_NOSIGNAL) != ssize_t(text.size())) return "<send failed>";
  std::string got;
  while (got.size() < text.size()) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 10000) != 1) break;
    char buf[4096];
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    got.append(buf, std::size_t(n));
  }
  return got;
}

std::size_t open_fds() {
  std::size_t n = 0;
  if (DIR* d = ::opendir("/proc/self/fd")) {
    while (::readdir(d) != nullptr) ++n;
    ::closedir(d);
  }
  return n;
}

}  // namespace

TEST_CASE("connect: kiln reaches a server on the sandbox's loopback and exchanges bytes" * doctest::skip(sandbox_skip())) {
  Env e;
  REQUIRE_SANDBOX(e);
  Session s(e, true, true);
  auto fd = e.m->connect(s.owner, s.id, kPort, 5s);
  REQUIRE_MESSAGE(fd.has_value(), (fd ? "" : fd.error().message));
  CHECK(finish_connect(fd->get()) == 0);
  CHECK(echo_round_trip(fd->get(), "hello from outside\n") == "hello from outside\n");
}

TEST_CASE("connect: a port nobody listens on is refused, in the call or on the socket" * doctest::skip(sandbox_skip())) {
  Env e;
  REQUIRE_SANDBOX(e);
  Session s(e, true, false);
  auto fd = e.m->connect(s.owner, s.id, kPort + 1, 5s);
  // pid 1's non-blocking connect returns EINPROGRESS (the RST comes a moment later), so the call
  // succeeds and the socket reports ECONNREFUSED (what Linux 6.x does here); an error from the
  // call itself, should a kernel refuse at once, must name the refusal and the port.
  if (fd) {
    CHECK(finish_connect(fd->get()) == ECONNREFUSED);
  } else {
    CHECK(fd.error().message.find("refused") != std::string::npos);
    CHECK(fd.error().message.find(std::to_string(kPort + 1)) != std::string::npos);
  }
  auto bad = e.m->connect(s.owner, s.id, 70000, 5s);
  REQUIRE_FALSE(bad);
  CHECK(bad.error().code == kiln::Errc::invalid_argument);
  CHECK(bad.error().message.find("70000") != std::string::npos);
}

TEST_CASE("connect: without services the loopback is down and connect fails" * doctest::skip(sandbox_skip())) {
  Env e;
  REQUIRE_SANDBOX(e);
  Session s(e, false, false);
  auto fd = e.m->connect(s.owner, s.id, kPort, 5s);
  if (fd) CHECK(finish_connect(fd->get()) != 0);
  else CHECK(fd.error().message.find("127.0.0.1") != std::string::npos);
}

TEST_CASE("connect: another owner's sandbox answers as an unknown one; a destroyed one is gone" * doctest::skip(sandbox_skip())) {
  Env e;
  REQUIRE_SANDBOX(e);
  Session s(e, true, true);
  std::string ghost = s.id;
  for (std::size_t i = ghost.find('_') + 1; i < ghost.size(); ++i) ghost[i] = ghost[i] == '0' ? '1' : '0';
  auto theirs = e.m->connect("bob", s.id, kPort, 5s);
  auto missing = e.m->connect("bob", ghost, kPort, 5s);
  REQUIRE_FALSE(theirs);
  REQUIRE_FALSE(missing);
  CHECK(theirs.error().code == kiln::Errc::not_found);
  CHECK(theirs.error().code == missing.error().code);
  std::string expected = missing.error().message;
  expected.replace(expected.find(ghost), ghost.size(), s.id);
  CHECK(theirs.error().message == expected);
  // Alice's still works, then her sandbox goes and so does the way in.
  REQUIRE(e.m->connect(s.owner, s.id, kPort, 5s));
  REQUIRE(e.m->destroy(s.owner, s.id));
  auto after = e.m->connect(s.owner, s.id, kPort, 5s);
  REQUIRE_FALSE(after);
  CHECK(after.error().code == kiln::Errc::not_found);
}

TEST_CASE("connect: 200 concurrent connects are all answered and connected, no fd left behind" * doctest::skip(sandbox_skip())) {
  Env e;
  REQUIRE_SANDBOX(e);
  Session s(e, true, true);
  const std::size_t before = open_fds();
  constexpr int kN = 200;
  std::vector<kiln::Result<UniqueFd>> got;
  for (int i = 0; i < kN; ++i) got.emplace_back(kiln::fail(kiln::Errc::internal, "not run"));
  {
    std::vector<std::jthread> threads;
    for (int i = 0; i < kN; ++i)
      threads.emplace_back([&, i] { got[std::size_t(i)] = e.m->connect(s.owner, s.id, kPort, 20s); });
  }
  int ok = 0, echoed = 0;
  for (auto& r : got) {
    if (!r) {
      MESSAGE(r.error().message);
      continue;
    }
    if (finish_connect(r->get()) == 0) ++ok;
  }
  CHECK(ok == kN);
  // Every one is a live connection to the server (a few round trips prove they are distinct).
  for (int i = 0; i < kN; i += 20)
    if (got[std::size_t(i)] && echo_round_trip(got[std::size_t(i)]->get(), "n" + std::to_string(i)) == "n" + std::to_string(i))
      ++echoed;
  CHECK(echoed == kN / 20);
  got.clear();
  CHECK(open_fds() == before);
}

TEST_CASE("workspace_readonly: the workspace cannot be written inside, /tmp can" * doctest::skip(sandbox_skip())) {
  Env e;
  REQUIRE_SANDBOX(e);
  auto p = e.policy();
  p.workspace_readonly = true;
  auto sb = e.m->create(p);
  REQUIRE_MESSAGE(sb.has_value(), (sb ? "" : sb.error().message));
  CHECK(sb->isolation["filesystem"].get<std::string>().find(e.ws + " read-only") != std::string::npos);
  ExecRequest r;
  r.argv = {"/bin/sh", "-c", "echo x > " + e.ws + "/written; echo ws=$?; echo y > /tmp/t && cat /tmp/t"};
  r.cwd = e.ws;
  auto res = e.m->exec(sb->sandbox_id, nullptr, r);
  REQUIRE(res);
  CHECK(res->out.text.find("ws=0") == std::string::npos);
  CHECK(res->out.text.find("ws=") != std::string::npos);
  CHECK(res->out.text.find("y\n") != std::string::npos);
  CHECK_FALSE(fs::exists(e.ws + "/written"));
  REQUIRE(e.m->destroy("", sb->sandbox_id));
}
