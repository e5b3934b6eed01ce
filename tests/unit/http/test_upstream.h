// A small real upstream for the proxy tests: a listening socket, a thread per connection,
// keep-alive, answers chosen by path, and a record of every request head that reached it.
#pragma once

#include <condition_variable>

#include <fmt/format.h>

#include "proxy_harness.h"

namespace kiln::test {

class TestUpstream {
 public:
  TestUpstream() {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(::listen(listen_fd_, 64) == 0);
    socklen_t len = sizeof a;
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
    acceptor_ = std::thread([this] { accept_loop(); });
  }
  ~TestUpstream() {
    stopping_ = true;
    ::shutdown(listen_fd_, SHUT_RDWR);
    acceptor_.join();
    {
      std::lock_guard lock(mu_);
      for (int fd : open_) ::shutdown(fd, SHUT_RDWR);
    }
    for (auto& t : workers_) t.join();
    ::close(listen_fd_);
  }

  unsigned short port = 0;
  std::atomic<int> connections{0};
  std::atomic<std::uint64_t> body_bytes_in{0};  // request body bytes received, as they arrive
  std::atomic<bool> infinite_ended{false};

  std::vector<Message> seen() {
    std::lock_guard lock(mu_);
    return seen_;
  }

 private:
  void accept_loop() {
    for (;;) {
      int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) return;
      ++connections;
      std::lock_guard lock(mu_);
      if (stopping_) {
        ::close(fd);
        return;
      }
      open_.insert(fd);
      workers_.emplace_back([this, fd] {
        serve(fd);
        std::lock_guard l(mu_);
        open_.erase(fd);
        ::close(fd);
      });
    }
  }

  void serve(int fd) {
    Wire w(fd);
    set_timeouts(fd, 60);
    for (;;) {
      auto req = read_head(w);
      if (!req) break;
      if (!read_body(w, *req, false, 1 << 20, &body_bytes_in)) break;
      {
        std::lock_guard lock(mu_);
        seen_.push_back(*req);
      }
      if (!answer(w, *req)) break;
    }
    w.fd = -1;  // closed by the caller, after it is unlisted
  }

  static std::string path_of(const std::string& start) {
    auto sp = start.find(' ');
    return start.substr(sp + 1, start.rfind(' ') - sp - 1);
  }

  bool ok(Wire& w, const std::string& body, const std::string& extra = "") {
    return w.send(fmt::format("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n{}\r\n{}", body.size(), extra, body));
  }

  static bool send_pattern(Wire& w, std::uint64_t n, bool chunked) {
    std::string block;
    for (std::uint64_t off = 0; off < n;) {
      std::size_t take = static_cast<std::size_t>(std::min<std::uint64_t>(n - off, 61 * 1024 + 17));
      block.resize(take);
      for (std::size_t i = 0; i < take; ++i) block[i] = pattern_at(off + i);
      if (chunked && !w.send(fmt::format("{:x}\r\n", take))) return false;
      if (!w.send(block)) return false;
      if (chunked && !w.send("\r\n")) return false;
      off += take;
    }
    return !chunked || w.send("0\r\n\r\n");
  }

  // Returns whether the connection may carry another request.
  bool answer(Wire& w, const Message& req) {
    std::string target = path_of(req.start);
    std::string path = target.substr(0, target.find('?'));
    std::uint64_t n = 0;
    if (auto q = target.find("n="); q != std::string::npos) n = std::stoull(target.substr(q + 2));
    if (path == "/hello") return ok(w, "hello " + target + (req.body.empty() ? "" : " body=" + req.body));
    if (path == "/echo-headers") {
      std::string body;
      for (const auto& [k, v] : req.headers) body += k + ": " + v + "\n";
      return ok(w, body, "Keep-Alive: timeout=5\r\nConnection: keep-alive, x-resp-hop\r\nX-Resp-Hop: 1\r\nX-App: yes\r\n");
    }
    if (path == "/cookies") {
      return ok(w, "cookies",
                "Set-Cookie: kiln_session=x; Path=/a/other/\r\nSet-Cookie: theme=dark; Path=/\r\n"
                "set-cookie:  KILN_SESSION =; Max-Age=0\r\nSet-Cookie: =kiln_session=z\r\nSet-Cookie: bare; Path=/\r\n");
    }
    if (path == "/hello-then-close") {  // a keep-alive answer, then the app drops the connection anyway
      ok(w, "bye");
      return false;
    }
    if (path == "/upload") return ok(w, fmt::format("got {} sum {}", req.body_bytes, req.checksum));
    if (path == "/download") {
      if (!w.send(fmt::format("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", n))) return false;
      return req.start.starts_with("HEAD") || send_pattern(w, n, false);
    }
    if (path == "/download-chunked") {
      return w.send("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n") && send_pattern(w, n, true);
    }
    if (path == "/until-close") {
      w.send("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nthe body ends when the app closes");
      return false;
    }
    if (path == "/ws") {
      if (!w.send("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\nHELLO")) return false;
      for (;;) {  // echo until the peer closes
        if (w.buf.empty() && !w.fill()) return false;
        if (!w.send(w.buf)) return false;
        w.buf.clear();
      }
    }
    if (path == "/hang") {
      while (w.fill()) {  // never answers; leaves when the proxy closes
      }
      return false;
    }
    if (path == "/infinite") {
      w.send("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
      std::string chunk = fmt::format("{:x}\r\n{}\r\n", 16384, std::string(16384, 'z'));
      while (w.send(chunk)) {
      }
      infinite_ended = true;
      return false;
    }
    return w.send("HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n");
  }

  int listen_fd_ = -1;
  std::atomic<bool> stopping_{false};
  std::thread acceptor_;
  std::mutex mu_;
  std::set<int> open_;
  std::vector<std::thread> workers_;
  std::vector<Message> seen_;
};

}  // namespace kiln::test
