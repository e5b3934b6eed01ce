// One HTTP/1.1 connection of the listener: read a request within the limits, ask the handler (or
// the endpoint owning the path), write the answer (small blobs from memory, large ones with
// sendfile, streamed bodies as chunks while they last), repeat while keep-alive holds.
#include <fcntl.h>
#include <sys/sendfile.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <optional>
#include <vector>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/bind_handler.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "http/server_impl.h"

namespace kiln::server::http {

namespace beast = boost::beast;
namespace bhttp = beast::http;

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

std::string client_address(const tcp::socket& s, bool* local) {
  boost::system::error_code ec;
  auto remote = s.remote_endpoint(ec);
  if (ec) return "unknown";
  auto addr = remote.address();
  if (addr.is_v6() && addr.to_v6().is_v4_mapped()) addr = net::ip::make_address_v4(net::ip::v4_mapped, addr.to_v6());
  auto here = s.local_endpoint(ec);
  *local = addr.is_loopback() || (!ec && here.address() == remote.address());
  return addr.to_string();
}

}  // namespace

class ChunkWriter;

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(Server::Impl& server, tcp::socket&& socket)
      : srv_(server), stream_(std::move(socket)), wait_timer_(stream_.get_executor()) {
    client_ = client_address(stream_.socket(), &local_);
    boost::system::error_code ec;
    stream_.socket().set_option(tcp::no_delay(true), ec);
    stream_.socket().native_non_blocking(true, ec);  // sendfile must never block an io thread
  }
  ~Session() {
    if (fd_ >= 0) ::close(fd_);
    srv_.session_ended();
    std::lock_guard lock(srv_.sessions_mu);
    srv_.sessions.erase(this);
  }

  void start() {
    net::dispatch(stream_.get_executor(), beast::bind_front_handler(&Session::read, shared_from_this()));
  }

  net::any_io_executor executor() { return stream_.get_executor(); }

  // At shutdown: an idle connection closes now, a busy one after its answer; a stream never
  // ends by itself, so it is cut (SSE clients reconnect to whoever serves next).
  void nudge() {
    if (!busy_ || streaming_) close();
  }

  // ---- streamed bodies (BodyStream calls these on the connection's strand) --------------------
  void stream_chunk(std::string bytes) {
    if (!streaming_ || stream_ending_ || closed_ || bytes.empty()) return;  // an empty chunk would end the body
    if (http11_) {
      out_.append(fmt::format("{:x}\r\n", bytes.size())).append(bytes).append("\r\n");
    } else {
      out_.append(bytes);
    }
    flush_stream();
  }

  void stream_end() {
    if (!streaming_ || stream_ending_ || closed_) return;
    stream_ending_ = true;
    if (http11_) out_.append("0\r\n\r\n");
    flush_stream();
  }

  // Set while the connection waits for a request head, reads a request body or drains a refused
  // one (steady-clock ticks since the head wait began), 0 otherwise; read from the accept strand
  // to pick whom to evict, and cleared there when picked. A body counts too: a peer trickling one
  // byte a second must not hold a slot that a real client needs.
  std::atomic<std::int64_t> head_wait_since{0};

  // On the connection's strand, after evict_oldest_waiting chose it.
  void evict() {
    if (evictable_) close();
  }

 private:
  void read() {
    busy_ = false;
    if (srv_.stopping) return close();
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(srv_.options.header_limit));
    // Beast checks Content-Length against the limit while parsing the header, before the path
    // is known: start from the largest limit, narrow it in on_header.
    std::size_t widest = srv_.options.body_limit;
    for (const auto& e : srv_.options.endpoints) widest = std::max(widest, e.body_limit);
    parser_->body_limit(widest);
    body_limit_ = srv_.options.body_limit;
    endpoint_ = nullptr;
    // One deadline for the whole head, however slowly it trickles in (slowloris).
    stream_.expires_after(srv_.options.header_timeout);
    evictable_ = true;
    head_wait_since = std::max<std::int64_t>(1, std::chrono::steady_clock::now().time_since_epoch().count());
    bhttp::async_read_header(stream_, buffer_, *parser_,
                             beast::bind_front_handler(&Session::on_header, shared_from_this()));
  }

  // The body limit depends on who serves the path, so it is set between header and body.
  // What an endpoint can refuse without the body (Host, Origin, token, method, media type) is
  // refused here, before a byte of it is read.
  void on_header(beast::error_code ec, std::size_t n) {
    if (ec) {
      not_evictable();
      return on_read(ec, n);
    }
    stream_.expires_after(srv_.options.read_timeout);  // the body has a deadline of its own
    endpoint_ = srv_.endpoint_for(parser_->get().target());
    if (endpoint_) body_limit_ = endpoint_->body_limit;
    if (auto length = parser_->content_length(); length && *length > body_limit_) {
      not_evictable();
      return on_read(bhttp::error::body_limit, 0);
    }
    if (endpoint_) {
      auto& m = parser_->get();
      // A repeated security header could mean two things to two readers: refuse it outright.
      for (std::string_view name : {"Host", "Origin", "Authorization", "Content-Type", "Mcp-Session-Id",
                                    "MCP-Protocol-Version", "Last-Event-ID"}) {
        if (m.count(name) > 1) {
          not_evictable();
          return fail(400, fmt::format("The {} header appears more than once.", name));
        }
      }
      // Only a body still to come is worth screening for: without one, the handler answers at
      // once and the connection may stay open.
      if (endpoint_->screen && !parser_->is_done()) {
        if (auto refusal = endpoint_->screen(head_request(m))) {
          not_evictable();
          return refuse_early(std::move(*refusal));
        }
      }
    }
    parser_->body_limit(body_limit_);  // a chunked body counts against it as it arrives
    if (parser_->is_done()) {
      not_evictable();
      return on_read({}, 0);
    }
    // Still evictable while the body arrives (head_wait_since keeps its place in the queue).
    bhttp::async_read(stream_, buffer_, *parser_, beast::bind_front_handler(&Session::on_body, shared_from_this()));
  }

  void on_body(beast::error_code ec, std::size_t n) {
    not_evictable();
    on_read(ec, n);
  }

  void not_evictable() {
    evictable_ = false;
    head_wait_since = 0;
  }

  // Everything of the request but its body, as the router and endpoints see it.
  Request head_request(const bhttp::request<bhttp::string_body>& m) const {
    Request req;
    req.method = std::string(m.method_string());
    req.target = std::string(m.target());
    req.host = std::string(m[bhttp::field::host]);
    req.authorization = std::string(m[bhttp::field::authorization]);
    req.cookie = std::string(m[bhttp::field::cookie]);
    req.if_none_match = std::string(m[bhttp::field::if_none_match]);
    req.if_range = std::string(m[bhttp::field::if_range]);
    req.range = std::string(m[bhttp::field::range]);
    req.content_type = std::string(m[bhttp::field::content_type]);
    req.accept = std::string(m[bhttp::field::accept]);
    req.sec_fetch_mode = std::string(m["Sec-Fetch-Mode"]);
    req.client = client_;
    req.client_is_local = local_;
    if (endpoint_) {
      // Accept is a list, and a list may come in several lines (RFC 9110 5.3).
      if (m.count(bhttp::field::accept) > 1) {
        req.accept.clear();
        for (const auto& f : m) {
          if (f.name() != bhttp::field::accept) continue;
          if (!req.accept.empty()) req.accept.append(", ");
          req.accept.append(f.value());
        }
      }
      req.has_origin = m.find(bhttp::field::origin) != m.end();
      req.origin = std::string(m[bhttp::field::origin]);
      req.has_protocol_version = m.find("MCP-Protocol-Version") != m.end();
      req.mcp_protocol_version = std::string(m["MCP-Protocol-Version"]);
      req.mcp_session_id = std::string(m["Mcp-Session-Id"]);
      req.last_event_id = std::string(m["Last-Event-ID"]);
    }
    return req;
  }

  static std::string size_text(std::size_t n) {
    if (n >= (1u << 20) && n % (1u << 20) == 0) return fmt::format("{} MiB", n >> 20);
    if (n >= 1024 && n % 1024 == 0) return fmt::format("{} KiB", n >> 10);
    return fmt::format("{} bytes", n);
  }

  void on_read(beast::error_code ec, std::size_t) {
    if (ec) {
      if (ec == bhttp::error::header_limit) return fail(431, "Request headers are larger than 8 KiB.");
      if (ec == bhttp::error::body_limit) return fail(413, fmt::format("Request bodies are limited to {}.", size_text(body_limit_)));
      if (ec.category() == bhttp::make_error_code(bhttp::error::bad_target).category() &&
          ec != bhttp::error::end_of_stream && ec != bhttp::error::partial_message) {
        return fail(400, "The request could not be parsed.");
      }
      return close();  // end of stream, timeout, reset: nobody to answer
    }
    busy_ = true;
    auto& m = parser_->get();
    keep_alive_ = m.keep_alive();
    Request req = head_request(m);
    req.body = std::move(m.body());
    if (endpoint_) {
      http11_ = m.version() >= 11;
      net::post(srv_.endpoint_pool, [self = shared_from_this(), req = std::move(req), ep = endpoint_]() mutable {
        Response r = ep->handler(std::move(req));
        net::post(self->stream_.get_executor(), [self, r = std::move(r)]() mutable { self->write(std::move(r)); });
      });
      return;
    }
    // A password means Argon2id: route it on the slow pool so static traffic never waits on it.
    if (!req.authorization.empty() || req.method == "POST") {
      net::post(srv_.slow_pool, [self = shared_from_this(), req = std::move(req)] {
        Response r = self->srv_.handler(req);
        net::post(self->stream_.get_executor(), [self, r = std::move(r)]() mutable { self->write(std::move(r)); });
      });
      return;
    }
    write(srv_.handler(req));
  }

  void fail(int status, std::string_view text) {
    busy_ = true;
    keep_alive_ = false;
    drain_ = true;
    Response r;
    r.status = status;
    r.body = fmt::format("{} {}: {}\n", status, reason_phrase(status), text);
    r.headers.emplace_back("Content-Type", "text/plain; charset=utf-8");
    write(std::move(r));
  }

  // A screen's refusal: the unread body is drained (briefly, and evictably), never parsed.
  void refuse_early(Response r) {
    busy_ = true;
    keep_alive_ = false;
    drain_ = true;
    http11_ = parser_->get().version() >= 11;
    write(std::move(r));
  }

  void format_head(const Response& r) {
    head_.clear();
    fmt::format_to(std::back_inserter(head_), "HTTP/1.1 {} {}\r\nDate: {}\r\nServer: kiln\r\n", r.status,
                   reason_phrase(r.status), http_date());
    for (const auto& [k, v] : r.headers) {
      if (v.find_first_of("\r\n") != std::string::npos) continue;  // never let a value split the header
      head_.append(k).append(": ").append(v).append("\r\n");
    }
  }

  void write(Response r) {
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
    if (!send_body || fd_ >= 0) {
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

  void server_error(const std::string& path) {
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

  // Until the socket's send buffer is full, then wait for room (bounded by the write timeout).
  void send_file() {
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

  void done() {
    if (drain_) return drain();
    if (!keep_alive_ || srv_.stopping) return close();
    read();
  }

  // After refusing a request whose rest is still arriving: closing with unread bytes would
  // send a reset that can destroy our answer in the client's buffer, so read them away first
  // (up to 64 KiB or 2 s).
  void drain() {
    drain_ = false;
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    stream_.expires_after(std::chrono::seconds(2));
    // A peer trickling the rest must not hold the slot either.
    evictable_ = true;
    head_wait_since = std::max<std::int64_t>(1, std::chrono::steady_clock::now().time_since_epoch().count());
    discard_.assign(4096, '\0');
    drain_some(0);
  }

  void drain_some(std::size_t total) {
    if (total > 64 * 1024) return close();
    auto self = shared_from_this();
    stream_.async_read_some(net::buffer(discard_), [self, total](beast::error_code ec, std::size_t n) {
      if (ec) return self->close();
      self->drain_some(total + n);
    });
  }

  // Headers go first in the same queue the producer's chunks join, so stream_start may write at
  // once. Meanwhile a read watches the peer: SSE clients leave by closing, and the producer must
  // hear of it (a session's GET stream is single) without waiting for the next write to fail.
  void start_stream(Response r);

  void watch_peer() {
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

  void flush_stream() {
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

  // Everything of a finished body is out: back to reading requests, once the peer watch let go.
  void finish_stream();

  void close() {
    if (closed_) return;
    closed_ = true;
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    stream_.socket().close(ec);
    end_streaming(true);
  }

  void end_streaming(bool cut);

  Server::Impl& srv_;
  bool evictable_ = false;  // on the strand; head_wait_since is its cross-thread shadow
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  net::steady_timer wait_timer_;
  std::string client_;
  bool local_ = false;
  bool busy_ = false;
  bool keep_alive_ = true;
  bool closed_ = false;
  bool drain_ = false;
  std::string discard_;
  std::string head_;
  std::string body_;
  std::shared_ptr<const std::string> cached_;
  const Endpoint* endpoint_ = nullptr;
  std::size_t body_limit_ = 0;
  bool http11_ = true;
  bool streaming_ = false;
  bool stream_ending_ = false;
  bool writing_ = false;
  bool watching_ = false;
  std::string out_;   // streamed bytes waiting for the write in progress
  std::string wire_;  // streamed bytes being written
  std::shared_ptr<ChunkWriter> body_stream_;
  std::function<void()> stream_closed_;
  int fd_ = -1;
  off_t file_offset_ = 0;
  std::uint64_t file_left_ = 0;
};

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

void start_session(Server::Impl& server, tcp::socket socket) {
  auto s = std::make_shared<Session>(server, std::move(socket));
  {
    std::lock_guard lock(server.sessions_mu);
    server.sessions.emplace(s.get(), s);
  }
  s->start();
}

bool evict_oldest_waiting(Server::Impl& server) {
  std::shared_ptr<Session> victim;  // released outside the lock: a Session's destructor takes it
  {
    std::lock_guard lock(server.sessions_mu);
    // Members of a listed session are alive while the lock is held (its destructor unlists it
    // under the same lock before they go), so reading them through the raw key is safe.
    std::int64_t oldest = 0;
    const std::weak_ptr<Session>* pick = nullptr;
    for (auto& [p, w] : server.sessions) {
      std::int64_t since = p->head_wait_since.load(std::memory_order_relaxed);
      if (since != 0 && (oldest == 0 || since < oldest)) {
        oldest = since;
        pick = &w;
      }
    }
    if (pick) victim = pick->lock();
    // Claimed here, so the next accept picks another one while this one is closing.
    if (victim) victim->head_wait_since = 0;
  }
  if (!victim) return false;
  net::post(victim->executor(), [victim] { victim->evict(); });
  return true;
}

void nudge_sessions(Server::Impl& server) {
  std::vector<std::shared_ptr<Session>> live;
  {
    std::lock_guard lock(server.sessions_mu);
    for (auto& [p, w] : server.sessions) {
      if (auto s = w.lock()) live.push_back(std::move(s));
    }
  }
  for (auto& s : live) net::post(s->executor(), [s] { s->nudge(); });
}

}  // namespace kiln::server::http
