// One HTTP/1.1 connection of the listener, writing side: the answer's head, its body (small blobs
// from memory, large ones with sendfile, streamed bodies as chunks while they last), draining a
// refused request, and the producer's handle on a streamed body.
#include <fcntl.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>

#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/bind_handler.hpp>
#include <boost/beast/http/read.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "http/connection.h"

namespace kiln::server::http {

namespace {

// RFC 9110 wants a Date on every answer; formatting it once a second per thread is enough.
std::string_view http_date() {
  thread_local std::time_t last = 0;
  thread_local char buf[64];
  std::time_t now = std::time(nullptr);
  if (now != last) {
    std::tm tm{};
    ::gmtime_r(&now, &tm);
    std::strftime(buf, sizeof buf, "%a, %d %b %Y %H:%M:%S GMT", &tm);
    last = now;
  }
  return buf;
}

}  // namespace

void Session::stream_chunk(std::string bytes) {
  if (!streaming_ || stream_ending_ || closed_ || bytes.empty()) return;  // an empty chunk would end the body
  if (http11_) {
    out_.append(fmt::format("{:x}\r\n", bytes.size())).append(bytes).append("\r\n");
  } else {
    out_.append(bytes);
  }
  flush_stream();
}

void Session::stream_end() {
  if (!streaming_ || stream_ending_ || closed_) return;
  stream_ending_ = true;
  if (http11_) out_.append("0\r\n\r\n");
  flush_stream();
}

void Session::format_head(const Response& r) {
  head_.clear();
  fmt::format_to(std::back_inserter(head_), "HTTP/1.1 {} {}\r\nDate: {}\r\nServer: kiln\r\n", r.status,
                 reason_phrase(r.status), http_date());
  for (const auto& [k, v] : r.headers) {
    // Never let a value split the header. Two memchr scans: find_first_of("\r\n") called memchr
    // once per character of every value, a few percent of a small page's CPU.
    if (v.find('\r') != std::string::npos || v.find('\n') != std::string::npos) continue;
    head_.append(k).append(": ").append(v).append("\r\n");
  }
}

void Session::write(Response r) {
  if (srv_.stopping) keep_alive_ = false;
  if (r.stream_start) return start_stream(std::move(r));
  bool bodyless = r.status == 304 || r.status == 204 || r.status < 200;
  bool send_body = !r.head && !bodyless && r.content_length() > 0;
  if (send_body && !r.file_path.empty()) {
    if (r.file_size <= FileCache::kMaxFile) {
      cached_ = srv_.cache.get(r.file_sha256, r.file_path, r.file_size);
      if (!cached_) return server_error(r.file_path);
    } else {
      fd_ = ::open(r.file_path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd_ < 0) return server_error(r.file_path);
      file_offset_ = static_cast<off_t>(r.file_offset);
      file_left_ = r.file_length;
    }
  }
  format_head(r);
  if (!bodyless) fmt::format_to(std::back_inserter(head_), "Content-Length: {}\r\n", r.content_length());
  if (!keep_alive_) head_.append("Connection: close\r\n");
  head_.append("\r\n");

  stream_.expires_after(srv_.options.read_timeout);
  auto self = shared_from_this();
  if (fd_ >= 0) {
    // Like nginx's tcp_nopush: the head waits (MSG_MORE) to leave in the same segments as the
    // file's first bytes, instead of as a packet of its own ahead of them.
    ssize_t n = ::send(stream_.socket().native_handle(), head_.data(), head_.size(), MSG_MORE | MSG_NOSIGNAL);
    if (n == static_cast<ssize_t>(head_.size())) return send_file();
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return close();
    std::size_t sent = n > 0 ? static_cast<std::size_t>(n) : 0;
    net::async_write(stream_, net::buffer(head_.data() + sent, head_.size() - sent),
                     [self](beast::error_code ec, std::size_t) {
                       if (ec) return self->close();
                       self->send_file();
                     });
    return;
  }
  if (!send_body) {
    net::async_write(stream_, net::buffer(head_), [self](beast::error_code ec, std::size_t) {
      if (ec) return self->close();
      if (self->fd_ >= 0) return self->send_file();
      self->done();
    });
    return;
  }
  if (cached_) {
    body_ = {};
    std::array<net::const_buffer, 2> bufs{net::buffer(head_),
                                          net::buffer(cached_->data() + r.file_offset, r.file_length)};
    net::async_write(stream_, bufs, [self](beast::error_code ec, std::size_t) {
      self->cached_.reset();
      if (ec) return self->close();
      self->done();
    });
    return;
  }
  body_ = std::move(r.body);
  std::array<net::const_buffer, 2> bufs{net::buffer(head_), net::buffer(body_)};
  net::async_write(stream_, bufs, [self](beast::error_code ec, std::size_t) {
    if (ec) return self->close();
    self->done();
  });
}

void Session::server_error(const std::string& path) {
  spdlog::error("serve: cannot read blob {}: {}", path, std::strerror(errno));
  cached_.reset();
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  keep_alive_ = false;
  Response r;
  r.status = 500;
  r.body = "500 Internal Server Error: a published file could not be read; the server log says why.\n";
  r.headers.emplace_back("Content-Type", "text/plain; charset=utf-8");
  write(std::move(r));
}

void Session::send_file() {
  int sock = stream_.socket().native_handle();
  while (file_left_ > 0) {
    ssize_t n = ::sendfile(sock, fd_, &file_offset_, std::min<std::uint64_t>(file_left_, 4u << 20));
    if (n > 0) {
      file_left_ -= static_cast<std::uint64_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      auto self = shared_from_this();
      wait_timer_.expires_after(srv_.options.read_timeout);
      wait_timer_.async_wait([self](beast::error_code ec) {
        if (!ec) self->stream_.socket().cancel();
      });
      stream_.socket().async_wait(tcp::socket::wait_write, [self](beast::error_code ec) {
        self->wait_timer_.cancel();
        if (ec) return self->close();
        self->send_file();
      });
      return;
    }
    return close();  // the peer left, or the blob shrank under us (it never should)
  }
  ::close(fd_);
  fd_ = -1;
  done();
}

void Session::done() {
  if (drain_) return drain();
  if (!keep_alive_ || srv_.stopping) return close();
  read();
}

void Session::drain() {
  drain_ = false;
  beast::error_code ec;
  stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
  stream_.expires_after(std::chrono::seconds(2));
  // A peer trickling the rest must not hold the slot either.
  evictable_ = true;
  head_wait_since = std::max<std::int64_t>(1, std::chrono::steady_clock::now().time_since_epoch().count());
  discard_.assign(64 * 1024, '\0');
  drain_some(0);
}

// Like nginx's lingering close: a client still sending the body of a request that was answered
// early keeps sending for a while; closing with its bytes unread would reset the connection and
// could destroy the answer before it is read. Up to 4 MiB within the 2 s above, then close.
void Session::drain_some(std::size_t total) {
  if (total > 4 * 1024 * 1024) return close();
  auto self = shared_from_this();
  stream_.async_read_some(net::buffer(discard_), [self, total](beast::error_code ec, std::size_t n) {
    if (ec) return self->close();
    self->drain_some(total + n);
  });
}

void Session::watch_peer() {
  watching_ = true;
  auto self = shared_from_this();
  stream_.async_read_some(buffer_.prepare(4096), [self](beast::error_code ec, std::size_t n) {
    self->watching_ = false;
    if (ec == net::error::operation_aborted && !self->closed_ && !self->streaming_) return self->done();
    if (ec) return self->close();
    self->buffer_.commit(n);  // a request sent early stays for the parser
    if (!self->streaming_) return self->done();
    // Nobody needs to send 64 KiB while receiving a stream: a peer doing so is cut off.
    if (self->buffer_.size() >= 64 * 1024) return self->close();
    self->watch_peer();
  });
}

void Session::flush_stream() {
  if (writing_ || closed_) return;
  if (out_.empty()) {
    if (stream_ending_) finish_stream();
    return;
  }
  writing_ = true;
  wire_ = std::move(out_);
  out_.clear();
  stream_.expires_after(srv_.options.stream_write_timeout);  // the pending peer read keeps no timer
  auto self = shared_from_this();
  net::async_write(stream_, net::buffer(wire_), [self](beast::error_code ec, std::size_t) {
    self->writing_ = false;
    if (ec) return self->close();
    self->flush_stream();
  });
}

// The producer's handle on a streamed body. It keeps only a weak hold on the connection, and
// refuses writes once the body ended or the connection is gone, so producers learn it at once.
class ChunkWriter final : public BodyStream {
 public:
  explicit ChunkWriter(const std::shared_ptr<Session>& conn) : conn_(conn), executor_(conn->executor()) {}

  bool write(std::string bytes) override {
    if (done_.load()) return false;
    net::post(executor_, [w = conn_, bytes = std::move(bytes)]() mutable {
      if (auto c = w.lock()) c->stream_chunk(std::move(bytes));
    });
    return true;
  }
  void end() override {
    if (done_.exchange(true)) return;
    net::post(executor_, [w = conn_] {
      if (auto c = w.lock()) c->stream_end();
    });
  }
  void mark_done() { done_ = true; }

 private:
  std::weak_ptr<Session> conn_;
  net::any_io_executor executor_;
  std::atomic<bool> done_{false};
};

void Session::start_stream(Response r) {
  format_head(r);
  if (http11_) head_.append("Transfer-Encoding: chunked\r\n");
  if (!http11_) keep_alive_ = false;  // HTTP/1.0: the body ends when the connection does
  if (!keep_alive_) head_.append("Connection: close\r\n");
  head_.append("\r\n");
  streaming_ = true;
  stream_ending_ = false;
  stream_closed_ = std::move(r.stream_closed);
  out_ = std::move(head_);
  body_stream_ = std::make_shared<ChunkWriter>(shared_from_this());
  stream_.expires_never();
  watch_peer();
  flush_stream();
  r.stream_start(body_stream_);
}

void Session::finish_stream() {
  end_streaming(false);
  if (!keep_alive_ || srv_.stopping) return close();
  if (watching_) {
    stream_.cancel();  // its handler resumes reading requests
    return;
  }
  done();
}

void Session::end_streaming(bool cut) {
  if (!streaming_) return;
  streaming_ = false;
  // Held until after the callback: the producer tells its connections apart by this object.
  auto body = std::move(body_stream_);
  if (body) body->mark_done();
  auto closed = std::move(stream_closed_);
  stream_closed_ = nullptr;
  if (cut && !stream_ending_ && closed) closed();
}

}  // namespace kiln::server::http
