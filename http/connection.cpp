// One HTTP/1.1 connection of the listener, reading side: read a request within the limits, ask the
// handler (or the endpoint owning the path), hand the answer to the writing side (connection_write.cpp),
// repeat while keep-alive holds; and the server's view of its connections (evict, nudge).
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <limits>
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

#include "core/ascii_text.h"
#include "http/connection.h"
#include "http/proxy_exchange.h"

namespace kiln::server::http {

namespace {

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

Session::Session(Server::Impl& server, tcp::socket&& socket)
    : srv_(server), stream_(std::move(socket)), wait_timer_(stream_.get_executor()) {
  client_ = client_address(stream_.socket(), &local_);
  boost::system::error_code ec;
  stream_.socket().set_option(tcp::no_delay(true), ec);
  stream_.socket().native_non_blocking(true, ec);  // sendfile must never block an io thread
}

Session::~Session() {
  if (fd_ >= 0) ::close(fd_);
  srv_.session_ended();
  std::lock_guard lock(srv_.sessions_mu);
  srv_.sessions.erase(this);
}

void Session::start() {
  net::dispatch(stream_.get_executor(), beast::bind_front_handler(&Session::read, shared_from_this()));
}

void Session::nudge() {
  // A stream that was ended (its last event and the end queued) gets to flush them: that is how
  // a stream says goodbye (a listen's graceful answer) rather than being cut.
  if (!busy_ || (streaming_ && !stream_ending_)) close();
}

void Session::evict() {
  if (evictable_) close();
}

void Session::read() {
  busy_ = false;
  if (srv_.stopping) return close();
  parser_.emplace();
  parser_->header_limit(static_cast<std::uint32_t>(srv_.options.header_limit));
  // Beast checks Content-Length against the limit while parsing the header, before the path
  // is known: start from the largest limit, narrow it in on_header.
  std::size_t widest = srv_.options.body_limit;
  for (const auto& e : srv_.options.endpoints) widest = std::max(widest, e.body_limit);
  if (srv_.options.proxy) widest = std::numeric_limits<std::size_t>::max();  // proxied bodies have no limit
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

void Session::on_header(beast::error_code ec, std::size_t n) {
  if (ec) {
    not_evictable();
    return on_read(ec, n);
  }
  stream_.expires_after(srv_.options.read_timeout);  // the body has a deadline of its own
  endpoint_ = srv_.endpoint_for(parser_->get().target());
  if (!endpoint_ && srv_.options.proxy && srv_.options.proxy->claims &&
      srv_.options.proxy->claims(std::string_view(parser_->get().target()))) {
    return start_proxy(head_request(parser_->get(), true));
  }
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
      if (auto refusal = endpoint_->screen(head_request(m, true))) {
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

void Session::on_body(beast::error_code ec, std::size_t n) {
  not_evictable();
  on_read(ec, n);
}

void Session::not_evictable() {
  evictable_ = false;
  head_wait_since = 0;
}

Request Session::head_request(const bhttp::request<bhttp::string_body>& m, bool every_field) const {
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
  }
  if (!every_field) return req;
  for (const auto& f : m) {
    std::string name(f.name_string());
    for (char& c : name) c = ascii_lower(c);
    req.headers.try_emplace(std::move(name), f.value());
  }
  return req;
}

std::string Session::size_text(std::size_t n) {
  if (n >= (1u << 20) && n % (1u << 20) == 0) return fmt::format("{} MiB", n >> 20);
  if (n >= 1024 && n % 1024 == 0) return fmt::format("{} KiB", n >> 10);
  return fmt::format("{} bytes", n);
}

void Session::on_read(beast::error_code ec, std::size_t) {
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
  Request req = head_request(m, endpoint_ != nullptr);
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

void Session::fail(int status, std::string_view text) {
  busy_ = true;
  keep_alive_ = false;
  drain_ = true;
  Response r;
  r.status = status;
  r.body = fmt::format("{} {}: {}\n", status, reason_phrase(status), text);
  r.headers.emplace_back("Content-Type", "text/plain; charset=utf-8");
  write(std::move(r));
}

void Session::refuse_early(Response r) {
  busy_ = true;
  keep_alive_ = false;
  drain_ = true;
  http11_ = parser_->get().version() >= 11;
  write(std::move(r));
}

void Session::close() {
  if (closed_) return;
  closed_ = true;
  if (auto proxy = proxy_.lock()) proxy->cut();
  beast::error_code ec;
  stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
  stream_.socket().close(ec);
  end_streaming(true);
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
