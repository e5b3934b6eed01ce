// The proxy tests' fixture: a Server on 127.0.0.1:0 with one io thread whose ProxyRoute sends
// /a/MODE/... to the test's upstream (or refuses, answers, replies late or never), recording
// every outcome its upstreams report.
#pragma once

#include <fcntl.h>

#include <chrono>
#include <condition_variable>
#include <memory>

#include "http/server.h"
#include "test_upstream.h"

using namespace kiln::server::http;
using namespace kiln::test;
using namespace std::chrono_literals;

namespace {

std::string get(const std::string& target, const std::string& extra = "") {
  return "GET " + target + " HTTP/1.1\r\nHost: site.test\r\n" + extra + "\r\n";
}

// A socket that connects to `port` without waiting (the proxy sees the connect in progress).
kiln::UniqueFd start_connect(unsigned short port) {
  kiln::UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int rc = ::connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a);
  REQUIRE((rc == 0 || errno == EINPROGRESS || errno == ECONNREFUSED));
  return fd;
}

struct Proxy {
  TestUpstream app;
  // A bound port nobody listens on: connecting to it is refused.
  kiln::UniqueFd closed_port{::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)};
  unsigned short refused_port = 0;
  std::mutex mu;
  std::condition_variable cv;
  std::vector<ProxyOutcome> outcomes;
  std::vector<UpstreamSocket> pool;  // mode "pooled": reusable sockets, handed out again as reused
  std::atomic<int> decides{0};
  std::vector<std::thread> repliers;
  std::chrono::seconds response_timeout{30};
  std::unique_ptr<Server> server;
  std::thread runner;

  explicit Proxy(const std::function<void(ServerOptions&)>& tune = {}) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(closed_port.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    socklen_t len = sizeof a;
    ::getsockname(closed_port.get(), reinterpret_cast<sockaddr*>(&a), &len);
    refused_port = ntohs(a.sin_port);

    ServerOptions o;
    o.listen = "127.0.0.1:0";
    o.io_threads = 1;  // a hung upstream must not stall the one io thread
    ProxyRoute route;
    route.claims = [](std::string_view target) { return target.starts_with("/a/"); };
    route.decide = [this](const Request& r, std::function<void(ProxyDecision)> reply) { decide(r, std::move(reply)); };
    o.proxy = route;
    if (tune) tune(o);
    auto bound = Server::bind(o, [](const Request&) {
      Response r;
      r.body = "plain";
      return r;
    });
    REQUIRE(bound.has_value());
    server = std::move(*bound);
    runner = std::thread([this] { server->run(); });
  }
  ~Proxy() { stop(); }
  void stop() {
    if (!server) return;
    server->stop();
    runner.join();
    for (auto& t : repliers) t.join();
    server.reset();
  }

  ProxyUpstream upstream_to(unsigned short port, const std::string& target, const Request& head,
                            UpstreamSocket fd = {}) {
    ProxyUpstream up;
    up.fd = fd ? std::move(fd) : UpstreamSocket(start_connect(port));
    up.target = target;
    up.drop_headers = {"x-secret"};
    up.drop_prefixes = {"x-kiln-"};
    up.set_headers = {{"X-Kiln-User", "alice"}, {"X-Forwarded-For", head.client}};
    up.drop_set_cookies = {"kiln_session"};
    up.response_timeout = response_timeout;
    up.done = [this](ProxyOutcome o) {
      std::lock_guard lock(mu);
      outcomes.push_back(std::move(o));
      cv.notify_all();
    };
    return up;
  }

  // /a/MODE/REST: app (forward REST), answer (a 403 of the route's own), refused, later (the
  // reply comes from another thread after a while), never (no reply at all).
  void decide(const Request& head, std::function<void(ProxyDecision)> reply) {
    ++decides;
    std::string rest = head.target.substr(3);
    std::string mode = rest.substr(0, rest.find('/'));
    std::string target = rest.substr(mode.size());
    ProxyDecision d;
    if (mode == "answer") {
      Response r;
      r.status = 403;
      r.body = "no entry";
      d.answer = std::move(r);
    } else if (mode == "refused") {
      d.upstream = upstream_to(refused_port, target, head);
    } else if (mode == "pooled") {
      UpstreamSocket idle;
      {
        std::lock_guard lock(mu);
        if (!pool.empty()) {
          idle = std::move(pool.back());
          pool.pop_back();
        }
      }
      const bool reused = bool(idle);
      d.upstream = upstream_to(app.port, target, head, std::move(idle));
      d.upstream->reused = reused;
      d.upstream->reconnect = [port = app.port] { return start_connect(port); };
      d.upstream->done = [this](ProxyOutcome o) {
        std::lock_guard lock(mu);
        if (o.reusable) pool.push_back(std::move(o.reusable));
        outcomes.push_back(std::move(o));
        cv.notify_all();
      };
    } else if (mode == "never") {
      return;
    } else if (mode == "later") {
      auto up = std::make_shared<ProxyUpstream>(upstream_to(app.port, target, head));
      std::lock_guard lock(mu);
      repliers.emplace_back([up, reply] {
        std::this_thread::sleep_for(300ms);
        ProxyDecision late;
        late.upstream = std::move(*up);
        reply(std::move(late));
      });
      return;
    } else {
      d.upstream = upstream_to(app.port, target, head);
    }
    reply(std::move(d));
  }

  bool wait_outcomes(std::size_t n, std::chrono::seconds limit = 30s) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, limit, [&] { return outcomes.size() >= n; });
  }
  std::size_t outcome_count() {
    std::lock_guard lock(mu);
    return outcomes.size();
  }
};

}  // namespace
