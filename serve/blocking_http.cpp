// The blocking client behind serve_answers and the app control calls: connect, send, read until
// the server closes (Connection: close), then parse the status line and the body, chunked or not.
#include "serve/blocking_http.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <string_view>

#include <fmt/format.h>

#include "core/unique_fd.h"

namespace kiln::server {
namespace {

// "http://HOST:PORT" -> host, port (IPv6 in brackets).
bool split_url(const std::string& url, std::string* host, std::string* port) {
  if (!url.starts_with("http://")) return false;
  std::string hp = url.substr(7);
  if (auto slash = hp.find('/'); slash != std::string::npos) hp.resize(slash);
  auto colon = hp.rfind(':');
  if (colon == std::string::npos) return false;
  *host = hp.substr(0, colon);
  *port = hp.substr(colon + 1);
  if (host->size() >= 2 && host->front() == '[') *host = host->substr(1, host->size() - 2);
  return !host->empty() && !port->empty();
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  return true;
}

// The body of a chunked answer; nullopt when it is cut or malformed.
std::optional<std::string> dechunk(std::string_view in, std::size_t max_body) {
  std::string out;
  for (;;) {
    auto eol = in.find("\r\n");
    if (eol == std::string_view::npos) return std::nullopt;
    std::string size_text(in.substr(0, eol));
    if (auto semi = size_text.find(';'); semi != std::string::npos) size_text.resize(semi);
    char* end = nullptr;
    unsigned long long n = std::strtoull(size_text.c_str(), &end, 16);
    if (size_text.empty() || end == size_text.c_str()) return std::nullopt;
    in.remove_prefix(eol + 2);
    if (n == 0) return out;  // trailers, if any, are of no interest
    if (n > max_body - out.size() || in.size() < n + 2) return std::nullopt;
    out.append(in.substr(0, n));
    in.remove_prefix(n + 2);
  }
}

std::optional<BlockingResponse> parse_response(const std::string& resp, std::size_t max_body) {
  if (!resp.starts_with("HTTP/1.")) return std::nullopt;
  auto head_end = resp.find("\r\n\r\n");
  if (head_end == std::string::npos || resp.size() < 12) return std::nullopt;
  BlockingResponse out;
  out.status = std::atoi(resp.c_str() + 9);
  if (out.status < 100) return std::nullopt;
  bool chunked = false;
  std::optional<std::size_t> length;
  std::string_view head(resp.data(), head_end);
  for (std::size_t pos = head.find("\r\n"); pos != std::string_view::npos;) {
    std::size_t next = head.find("\r\n", pos + 2);
    std::string_view line = head.substr(pos + 2, next == std::string_view::npos ? std::string_view::npos : next - pos - 2);
    pos = next;
    auto colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    std::string_view name = line.substr(0, colon), value = line.substr(colon + 1);
    while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
    if (iequals(name, "transfer-encoding") && value.find("chunked") != std::string_view::npos) chunked = true;
    if (iequals(name, "content-length")) length = std::strtoull(std::string(value).c_str(), nullptr, 10);
  }
  std::string_view body(resp.data() + head_end + 4, resp.size() - head_end - 4);
  if (chunked) {
    auto b = dechunk(body, max_body);
    if (!b) return std::nullopt;
    out.body = std::move(*b);
  } else {
    if (length) {
      if (body.size() < *length) return std::nullopt;  // cut short
      body = body.substr(0, *length);
    }
    if (body.size() > max_body) return std::nullopt;
    out.body = std::string(body);
  }
  return out;
}

}  // namespace

std::optional<BlockingResponse> blocking_http(const std::string& url, const BlockingRequest& req) {
  std::string host, port;
  if (!split_url(url, &host, &port)) return std::nullopt;
  addrinfo hints{};
  hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* ai = nullptr;
  if (::getaddrinfo(host.c_str(), port.c_str(), &hints, &ai) != 0 || !ai) return std::nullopt;
  UniqueFd s(::socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  int rc = s.get() < 0 ? -1 : ::connect(s.get(), ai->ai_addr, ai->ai_addrlen);
  ::freeaddrinfo(ai);
  if (s.get() < 0 || (rc != 0 && errno != EINPROGRESS)) return std::nullopt;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(req.timeout_ms);
  auto wait = [&](short events) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{s.get(), events, 0};
    return ::poll(&p, 1, static_cast<int>(left.count())) == 1;
  };
  if (rc != 0) {
    int err = 0;
    socklen_t len = sizeof err;
    if (!wait(POLLOUT) || ::getsockopt(s.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) return std::nullopt;
  }
  const bool ipv6 = host.find(':') != std::string::npos;
  std::string out = fmt::format("{} {} HTTP/1.1\r\nHost: {}{}{}:{}\r\nConnection: close\r\n", req.method, req.path,
                                ipv6 ? "[" : "", host, ipv6 ? "]" : "", port);
  for (const auto& [name, value] : req.headers) out += fmt::format("{}: {}\r\n", name, value);
  if (!req.body.empty() || req.method == "POST") out += fmt::format("Content-Length: {}\r\n", req.body.size());
  out += "\r\n";
  out += req.body;
  std::size_t sent = 0;
  while (sent < out.size()) {
    ssize_t n = ::send(s.get(), out.data() + sent, out.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<std::size_t>(n);
    } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      if (!wait(POLLOUT)) return std::nullopt;
    } else {
      return std::nullopt;
    }
  }
  // Headers and chunk framing on top of the body: a little slack over max_body.
  const std::size_t cap = req.max_body + req.max_body / 16 + 16384;
  std::string resp;
  char buf[16384];
  for (;;) {
    ssize_t n = ::recv(s.get(), buf, sizeof buf, 0);
    if (n > 0) {
      resp.append(buf, static_cast<std::size_t>(n));
      if (resp.size() > cap) return std::nullopt;
    } else if (n == 0) {
      break;
    } else if (errno == EAGAIN || errno == EINTR) {
      if (!wait(POLLIN)) return std::nullopt;
    } else {
      return std::nullopt;
    }
  }
  return parse_response(resp, req.max_body);
}

}  // namespace kiln::server
