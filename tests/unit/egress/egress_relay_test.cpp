// The proxy's relay over real loopback sockets: bulk streams arrive whole and in order both ways,
// half-closes pass through, the log counts every byte, and a client that vanishes mid-download
// ends the relay and its upstream connection.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <doctest/doctest.h>

#include <atomic>
#include <mutex>
#include <vector>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include "core/unique_fd.h"
#include "sandbox/egress/egress_policy.h"
#include "sandbox/egress/egress_proxy.h"

using namespace kiln;
using namespace kiln::egress;

namespace {

constexpr std::size_t kUp = 4u << 20, kDown = 16u << 20;

// Byte i of a stream: a position-dependent pattern, so a dropped or reordered chunk shows.
char pattern(std::size_t i) { return char((i * 131 + (i >> 13)) & 0xff); }

UniqueFd listener(int& port) {
  UniqueFd s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  REQUIRE(::bind(s.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  REQUIRE(::listen(s.get(), 8) == 0);
  REQUIRE(::getsockname(s.get(), reinterpret_cast<sockaddr*>(&a), &len) == 0);
  port = ntohs(a.sin_port);
  return s;
}

UniqueFd dial(int port) {
  UniqueFd s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(std::uint16_t(port));
  REQUIRE(::connect(s.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  return s;
}

// Writes `n` pattern bytes; false once the peer is gone (MSG_NOSIGNAL: EPIPE, not a signal).
bool send_pattern(int fd, std::size_t n) {
  char buf[65536];
  for (std::size_t off = 0; off < n;) {
    std::size_t len = std::min(sizeof buf, n - off);
    for (std::size_t i = 0; i < len; ++i) buf[i] = pattern(off + i);
    ssize_t w = ::send(fd, buf, len, MSG_NOSIGNAL);
    if (w <= 0) return false;
    off += std::size_t(w);
  }
  return true;
}

// Reads to EOF (or `limit` bytes); how many arrived, or SIZE_MAX at the first byte out of pattern.
std::size_t recv_pattern(int fd, std::size_t limit = SIZE_MAX) {
  char buf[65536];
  std::size_t got = 0;
  while (got < limit) {
    ssize_t n = ::recv(fd, buf, std::min(sizeof buf, limit - got), 0);
    if (n <= 0) break;
    for (ssize_t i = 0; i < n; ++i)
      if (buf[i] != pattern(got + std::size_t(i))) return SIZE_MAX;
    got += std::size_t(n);
  }
  return got;
}

std::string read_head(int fd) {
  std::string head;
  char c;
  while (head.find("\r\n\r\n") == std::string::npos && ::recv(fd, &c, 1, 0) == 1) head += c;
  return head;
}

// A proxy on its own io thread; serve() hands it the accepted end of a fresh loopback connection
// and returns the client's end, as pid 1's handover does.
struct Rig {
  boost::asio::io_context io;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work = boost::asio::make_work_guard(io);
  EgressProxy proxy;
  std::shared_ptr<SandboxEgress> sandbox;
  std::shared_ptr<NetworkLog> log = std::make_shared<NetworkLog>();
  std::thread thread{[this] { io.run(); }};
  int front_port = 0;
  UniqueFd front = listener(front_port);

  explicit Rig(int upstream_port, ProxyOptions options = {}) : proxy(io, std::move(options)) {
    // A raw tunnel to a loopback address: an address entry naming the port, allow_private.
    auto p = parse_policy(nlohmann::json{{"allow", {"127.0.0.1:" + std::to_string(upstream_port)}}, {"allow_private", true}},
                          "network");
    REQUIRE(p.has_value());
    sandbox = std::make_shared<SandboxEgress>(Scope{*p, std::nullopt});
    other = std::make_shared<SandboxEgress>(Scope{*p, std::nullopt});
  }
  std::shared_ptr<SandboxEgress> other;  // a second sandbox with the same allowlist
  // Every connection closed, its handlers run out, so the loop ends by itself.
  ~Rig() {
    boost::asio::post(io, [this] {
      sandbox->close_all();
      other->close_all();
    });
    work.reset();
    thread.join();
  }

  UniqueFd connect_tunnel(int upstream_port, std::shared_ptr<SandboxEgress> from = nullptr) {
    std::string head;
    UniqueFd client = ask_connect(upstream_port, head, std::move(from));
    REQUIRE(head.starts_with("HTTP/1.1 200"));
    return client;
  }

  // A CONNECT through the proxy from `from` (the rig's sandbox by default); `head` is the answer's
  // head, and the whole answer when it is a refusal.
  UniqueFd ask_connect(int upstream_port, std::string& head, std::shared_ptr<SandboxEgress> from = nullptr) {
    UniqueFd client = dial(front_port);
    UniqueFd accepted(::accept4(front.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    REQUIRE(accepted);
    if (!from) from = sandbox;
    boost::asio::post(io, [this, fd = accepted.release(), from] { proxy.serve(UniqueFd(fd), from, log); });
    std::string req = "CONNECT 127.0.0.1:" + std::to_string(upstream_port) + " HTTP/1.1\r\nHost: 127.0.0.1:" +
                      std::to_string(upstream_port) + "\r\n\r\n";
    REQUIRE(::send(client.get(), req.data(), req.size(), MSG_NOSIGNAL) == ssize_t(req.size()));
    head = read_head(client.get());
    if (!head.starts_with("HTTP/1.1 200")) {
      char buf[4096];
      for (ssize_t n; (n = ::recv(client.get(), buf, sizeof buf, 0)) > 0;) head.append(buf, std::size_t(n));
    }
    return client;
  }

  // The connection's log entry once the relay has closed it (open false), within 10 s.
  nlohmann::json closed_entry() {
    for (int i = 0; i < 1000; ++i) {
      auto j = log->to_json();
      if (j.size() == 1 && !j[0].contains("open")) return j[0];
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    FAIL("the relay did not close: " << log->to_json().dump());
    return {};
  }
};

}  // namespace

TEST_CASE("a bulk tunnel relays every byte both ways, in order, and passes each half-close") {
  int up_port = 0;
  UniqueFd up_listen = listener(up_port);
  std::atomic<std::size_t> upstream_got{0};
  // The upstream reads the whole upload (to the client's half-close), then answers kDown bytes.
  std::thread upstream([&] {
    UniqueFd c(::accept4(up_listen.get(), nullptr, nullptr, SOCK_CLOEXEC));
    upstream_got = recv_pattern(c.get());
    send_pattern(c.get(), kDown);
  });
  Rig rig(up_port);
  UniqueFd client = rig.connect_tunnel(up_port);
  CHECK(send_pattern(client.get(), kUp));
  ::shutdown(client.get(), SHUT_WR);
  CHECK(recv_pattern(client.get()) == kDown);
  upstream.join();
  CHECK(upstream_got == kUp);
  auto e = rig.closed_entry();
  CHECK(e["decision"] == "allowed");
  CHECK(e["bytes_up"] == kUp);
  CHECK(e["bytes_down"] == kDown);
}

// A reset that lands while the proxy is inside a splice to the client is swallowed by that
// splice's partial count; the next splice then meets a shut socket and raises SIGPIPE, which kills
// a process that keeps its default (kiln run, these tests). Rare per round, so several rounds.
TEST_CASE("a client reset mid-download ends the relay and closes the upstream") {
  for (int round = 0; round < 12; ++round) {
    CAPTURE(round);
    int up_port = 0;
    UniqueFd up_listen = listener(up_port);
    std::atomic<bool> upstream_stopped{false};
    // Far more than the socket buffers hold, so the proxy is still writing when the client goes.
    std::thread upstream([&] {
      UniqueFd c(::accept4(up_listen.get(), nullptr, nullptr, SOCK_CLOEXEC));
      upstream_stopped = !send_pattern(c.get(), 1u << 30);
    });
    Rig rig(up_port);
    UniqueFd client = rig.connect_tunnel(up_port);
    // The first byte the upstream sends is the tunnel's first: raw (not TLS) is allowed by the
    // port-naming entry once the client has spoken, so it speaks first.
    CHECK(send_pattern(client.get(), 16));
    CHECK(recv_pattern(client.get(), kDown) == kDown);
    linger hard{1, 0};  // close with a reset, the abrupt way a killed process goes
    ::setsockopt(client.get(), SOL_SOCKET, SO_LINGER, &hard, sizeof hard);
    client.reset();
    upstream.join();  // the proxy closed the upstream side too
    CHECK(upstream_stopped);
    auto e = rig.closed_entry();
    CHECK(e["bytes_down"].get<std::uint64_t>() >= kDown);
    CHECK(e["bytes_down"].get<std::uint64_t>() < (1u << 30));
  }
}

// Each relayed connection holds six of the process's descriptors, so the proxy bounds them: one
// sandbox holds at most a quarter of the total, all together at most the total (by default half of
// RLIMIT_NOFILE over six); past either the answer is a 503 that names it, and a closed connection
// gives its place back.
TEST_CASE("connections are bounded per sandbox and in total, and a closed one frees its place") {
  int up_port = 0;
  UniqueFd up_listen = listener(up_port);
  std::vector<UniqueFd> upstream_ends;
  std::mutex mu;
  std::atomic<bool> stop{false};
  std::thread upstream([&] {
    while (!stop) {
      UniqueFd c(::accept4(up_listen.get(), nullptr, nullptr, SOCK_CLOEXEC));
      std::lock_guard lock(mu);
      if (c) upstream_ends.push_back(std::move(c));
    }
  });
  {
    Rig rig(up_port, ProxyOptions{.max_connections_total = 12});  // a quarter: 8 is the floor per sandbox
    std::vector<UniqueFd> open;
    std::string head;
    for (int i = 0; i < 8; ++i) open.push_back(rig.connect_tunnel(up_port));
    UniqueFd refused = rig.ask_connect(up_port, head);
    CHECK(head.starts_with("HTTP/1.1 503"));
    CHECK(head.find("this sandbox has 8 connections open already") != std::string::npos);
    for (int i = 0; i < 4; ++i) open.push_back(rig.connect_tunnel(up_port, rig.other));
    refused = rig.ask_connect(up_port, head, rig.other);
    CHECK(head.starts_with("HTTP/1.1 503"));
    CHECK(head.find("12 connections are open through it across all sandboxes") != std::string::npos);
    // One of the first sandbox's closes (still before its tunnel's first byte): the proxy sees the
    // end, destroys the connection, and has room again.
    open.front().reset();
    bool admitted = false;
    for (int i = 0; i < 500 && !admitted; ++i) {
      UniqueFd again = rig.ask_connect(up_port, head, rig.other);
      admitted = head.starts_with("HTTP/1.1 200");
      if (admitted) open.push_back(std::move(again));
      else std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    CHECK(admitted);
    open.clear();
  }
  stop = true;
  UniqueFd wake = dial(up_port);  // the accept loop's last turn
  upstream.join();
}
