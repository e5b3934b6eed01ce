// The blocking client the tools use to reach kiln serve, against a one-connection server on a
// loopback socket that answers what each case scripts: plain and chunked bodies, error statuses,
// a request body with its headers, an answer over the size limit and nobody listening.
#include <doctest/doctest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <thread>

#include <fmt/format.h>

#include "core/unique_fd.h"
#include "serve/blocking_http.h"

using kiln::UniqueFd;
using kiln::server::blocking_http;
using kiln::server::BlockingRequest;

namespace {

// Listens on 127.0.0.1:<free port>, takes one connection, reads the request whole (headers and a
// Content-Length body), answers `reply` and closes.
struct OneShotServer {
  UniqueFd listener;
  int port = 0;
  std::string request;
  std::thread thread;

  explicit OneShotServer(std::string reply) {
    listener.reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(listener.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(::listen(listener.get(), 1) == 0);
    socklen_t len = sizeof a;
    ::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
    thread = std::thread([this, reply = std::move(reply)] {
      UniqueFd c(::accept(listener.get(), nullptr, nullptr));
      if (c.get() < 0) return;
      char buf[4096];
      for (;;) {
        auto head = request.find("\r\n\r\n");
        if (head != std::string::npos) {
          std::size_t want = 0;
          if (auto cl = request.find("Content-Length: "); cl != std::string::npos) want = std::stoul(request.substr(cl + 16));
          if (request.size() >= head + 4 + want) break;
        }
        ssize_t n = ::recv(c.get(), buf, sizeof buf, 0);
        if (n <= 0) break;
        request.append(buf, std::size_t(n));
      }
      std::size_t sent = 0;
      while (sent < reply.size()) {
        ssize_t n = ::send(c.get(), reply.data() + sent, reply.size() - sent, MSG_NOSIGNAL);
        if (n <= 0) break;
        sent += std::size_t(n);
      }
    });
  }
  ~OneShotServer() {
    if (thread.joinable()) thread.join();
  }
  std::string url() const { return fmt::format("http://127.0.0.1:{}", port); }
};

}  // namespace

TEST_CASE("a plain answer: status and exactly Content-Length bytes of body") {
  OneShotServer s("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{\"ok\":true}");
  BlockingRequest req;
  req.path = "/healthz";
  auto r = blocking_http(s.url(), req);
  REQUIRE(r);
  CHECK(r->status == 200);
  CHECK(r->body == "{\"ok\":true}");
  s.thread.join();
  CHECK(s.request.starts_with("GET /healthz HTTP/1.1\r\n"));
  CHECK(s.request.find("Connection: close\r\n") != std::string::npos);
}

TEST_CASE("a POST carries its headers and body; a chunked error answer is put back together") {
  OneShotServer s("HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n"
                  "5\r\n{\"err\r\n9;ext=1\r\nor\":\"no\"}\r\n0\r\n\r\n");
  BlockingRequest req;
  req.method = "POST";
  req.path = "/_kiln/apps";
  req.headers = {{"Authorization", "Bearer abc"}, {"Content-Type", "application/json"}};
  req.body = R"({"op":"list"})";
  auto r = blocking_http(s.url(), req);
  REQUIRE(r);
  CHECK(r->status == 404);
  CHECK(r->body == R"({"error":"no"})");
  s.thread.join();
  CHECK(s.request.starts_with("POST /_kiln/apps HTTP/1.1\r\n"));
  CHECK(s.request.find("Authorization: Bearer abc\r\n") != std::string::npos);
  CHECK(s.request.find("Content-Length: 13\r\n") != std::string::npos);
  CHECK(s.request.ends_with("\r\n\r\n{\"op\":\"list\"}"));
}

TEST_CASE("an answer over max_body, a cut one or none at all is a failure, never a short body") {
  {
    OneShotServer s("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n" + std::string(100, 'x'));
    BlockingRequest req;
    req.max_body = 50;
    CHECK_FALSE(blocking_http(s.url(), req));
  }
  {
    OneShotServer s("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort");
    CHECK_FALSE(blocking_http(s.url(), BlockingRequest{}));
  }
  {
    OneShotServer s("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab");
    CHECK_FALSE(blocking_http(s.url(), BlockingRequest{}));
  }
  int port;
  {
    OneShotServer s("");
    port = s.port;
    ::shutdown(s.listener.get(), SHUT_RDWR);
  }
  CHECK_FALSE(blocking_http(fmt::format("http://127.0.0.1:{}", port), BlockingRequest{}));
  CHECK_FALSE(blocking_http("not a url", BlockingRequest{}));
}
