// What the proxy tests share: blocking-socket HTTP helpers for the client side, and a small real
// upstream (one thread per connection) whose answers are chosen by path and which records what
// reached it. No code of the proxy is used here, so the tests see it only through sockets.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

namespace kiln::test {

// A socket with what was read from it but not consumed yet.
struct Wire {
  int fd = -1;
  std::string buf;
  explicit Wire(int f = -1) : fd(f) {}
  ~Wire() {
    if (fd >= 0) ::close(fd);
  }
  Wire(const Wire&) = delete;
  Wire& operator=(const Wire&) = delete;

  bool fill() {
    char tmp[65536];
    ssize_t n = ::recv(fd, tmp, sizeof tmp, 0);
    if (n <= 0) return false;
    buf.append(tmp, static_cast<std::size_t>(n));
    return true;
  }
  std::optional<std::string> until(std::string_view delim) {
    for (;;) {
      if (auto p = buf.find(delim); p != std::string::npos) {
        std::string out = buf.substr(0, p + delim.size());
        buf.erase(0, p + delim.size());
        return out;
      }
      if (!fill()) return std::nullopt;
    }
  }
  // Hands `n` bytes to `sink` piece by piece, never holding more than one read.
  bool exact(std::uint64_t n, const std::function<void(std::string_view)>& sink) {
    while (n > 0) {
      if (buf.empty() && !fill()) return false;
      std::size_t take = static_cast<std::size_t>(std::min<std::uint64_t>(n, buf.size()));
      sink(std::string_view(buf).substr(0, take));
      buf.erase(0, take);
      n -= take;
    }
    return true;
  }
  bool send(std::string_view s) const {
    while (!s.empty()) {
      ssize_t n = ::send(fd, s.data(), s.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      s.remove_prefix(static_cast<std::size_t>(n));
    }
    return true;
  }
  // Whether anything (bytes or a close) arrived within `ms`.
  bool readable(int ms) const {
    if (!buf.empty()) return true;
    pollfd p{fd, POLLIN, 0};
    return ::poll(&p, 1, ms) > 0;
  }
};

inline void set_timeouts(int fd, int seconds) {
  timeval tv{seconds, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

inline int dial(unsigned short port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  set_timeouts(fd, 30);
  return fd;
}

struct Message {
  std::string start;  // request or status line
  std::map<std::string, std::string> headers;  // lower-case names; repeated ones joined by ", "
  std::string body;
  std::uint64_t body_bytes = 0;
  std::uint64_t checksum = 0;
  int status() const { return start.size() > 12 ? std::stoi(start.substr(9, 3)) : 0; }
  bool has(const std::string& n) const { return headers.count(n) != 0; }
  std::string get(const std::string& n) const { return has(n) ? headers.at(n) : std::string(); }
};

inline std::uint64_t mix(std::uint64_t sum, std::string_view piece) {
  for (unsigned char c : piece) sum = (sum ^ c) * 1099511628211ull;  // FNV-1a
  return sum;
}

// The byte at `offset` of every large body the tests send or ask for.
inline char pattern_at(std::uint64_t offset) { return static_cast<char>('a' + (offset * 7 + offset / 4093) % 26); }

inline std::optional<Message> read_head(Wire& w) {
  auto head = w.until("\r\n\r\n");
  if (!head) return std::nullopt;
  Message m;
  std::string_view rest = *head;
  auto eol = rest.find("\r\n");
  m.start = std::string(rest.substr(0, eol));
  rest.remove_prefix(eol + 2);
  while (rest.size() > 2) {
    eol = rest.find("\r\n");
    std::string_view line = rest.substr(0, eol);
    rest.remove_prefix(eol + 2);
    auto colon = line.find(':');
    std::string name(line.substr(0, colon));
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    std::string value(line.substr(colon + 1));
    while (!value.empty() && value.front() == ' ') value.erase(0, 1);
    auto& slot = m.headers[name];
    slot = slot.empty() ? value : slot + ", " + value;
  }
  return m;
}

// The body as framed (length, chunked, or until close when `until_close`): counted and
// checksummed, kept only up to `keep` bytes; `progress` counts bytes as they arrive.
inline bool read_body(Wire& w, Message& m, bool until_close, std::size_t keep = 1 << 20,
                      std::atomic<std::uint64_t>* progress = nullptr) {
  auto sink = [&](std::string_view piece) {
    m.body_bytes += piece.size();
    if (progress) *progress += piece.size();
    m.checksum = mix(m.checksum, piece);
    if (m.body.size() < keep) m.body.append(piece.substr(0, keep - m.body.size()));
  };
  if (m.get("transfer-encoding") == "chunked") {
    for (;;) {
      auto line = w.until("\r\n");
      if (!line) return false;
      std::uint64_t size = std::stoull(*line, nullptr, 16);
      if (size == 0) return w.until("\r\n").has_value();
      if (!w.exact(size, sink) || !w.until("\r\n")) return false;
    }
  }
  if (m.has("content-length")) return w.exact(std::stoull(m.get("content-length")), sink);
  if (!until_close) return true;
  sink(w.buf);
  w.buf.clear();
  char tmp[65536];
  for (;;) {
    ssize_t n = ::recv(w.fd, tmp, sizeof tmp, 0);
    if (n == 0) return true;
    if (n < 0) return false;
    sink(std::string_view(tmp, static_cast<std::size_t>(n)));
  }
}

inline std::optional<Message> read_response(Wire& w, bool head_request = false) {
  auto m = read_head(w);
  if (!m) return std::nullopt;
  int s = m->status();
  if (head_request || s == 204 || s == 304 || s / 100 == 1) return m;
  if (!read_body(w, *m, true)) return std::nullopt;
  return m;
}

// A request on a fresh or kept connection; the answer, or nullopt if the connection failed.
inline std::optional<Message> roundtrip(Wire& w, const std::string& request, bool head_request = false) {
  if (!w.send(request)) return std::nullopt;
  return read_response(w, head_request);
}

inline std::uint64_t proc_status_kb(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field, 0) == 0) return std::stoull(line.substr(std::string_view(field).size()));
  }
  return 0;
}

}  // namespace kiln::test
