// The reverse proxy's request side and the end of an exchange: wait for the upstream's connect,
// send the rewritten head, stream the client's body with backpressure (no size limit, one 64 KiB
// buffer), the two timeouts, the proxy's own 502/504, and handing the connection back.
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

#include <boost/asio/query.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/read.hpp>
#include <fmt/format.h>

#include "core/ascii_text.h"
#include "http/proxy_exchange.h"

namespace kiln::server::http {

namespace {
constexpr std::size_t kPooledChunks = 16;
thread_local std::vector<std::unique_ptr<char[]>> chunk_pool;
thread_local const char t_this_thread = 0;  // its address tells the threads apart (parked_here)

// A finished exchange's descriptor, still registered with its Server's io loop. Dropped after
// that Server is gone, it must not touch the loop (even release() would): the socket is closed
// and the small object is left behind, once per pooled socket at teardown.
struct Parked {
  std::shared_ptr<ProxyGate> gate;
  net::posix::stream_descriptor* descriptor;
  Parked(std::shared_ptr<ProxyGate> g, net::posix::stream_descriptor&& d)
      : gate(std::move(g)), descriptor(new net::posix::stream_descriptor(std::move(d))) {}
  Parked(const Parked&) = delete;
  Parked& operator=(const Parked&) = delete;
  ~Parked() {
    std::lock_guard lock(gate->mu);
    if (gate->open) {
      delete descriptor;
    } else {
      ::close(descriptor->native_handle());
    }
  }
};
}  // namespace

bool UpstreamSocket::parked_here() const { return parked_ && parked_on_ == &t_this_thread; }

std::unique_ptr<char[]> ProxyExchange::Chunk::take() {
  if (chunk_pool.empty()) return std::make_unique_for_overwrite<char[]>(kChunk);
  auto b = std::move(chunk_pool.back());
  chunk_pool.pop_back();
  return b;
}

ProxyExchange::Chunk::~Chunk() {
  if (bytes && chunk_pool.size() < kPooledChunks) chunk_pool.push_back(std::move(bytes));
}

ProxyExchange::ProxyExchange(std::shared_ptr<Session> session, ProxyUpstream upstream)
    : s_(std::move(session)),
      up_(std::move(upstream)),
      upstream_(s_->executor()),
      idle_timer_(s_->executor()),
      response_timer_(s_->executor()) {
  req_.emplace(std::move(*s_->parser_));
  req_->body_limit(boost::optional<std::uint64_t>());  // a proxied body has no size limit
}

ProxyExchange::~ProxyExchange() {
  if (!reported_) {
    reported_ = true;
    if (up_.done) up_.done(std::move(outcome_));
  }
}

void ProxyExchange::start() {
  auto& m = req_->get();
  head_request_ = m.method() == bhttp::verb::head;
  // An upgrade with a body would leave the tunnel with half a request: forward it as a plain one.
  upgrade_ = req_->upgrade() && req_->is_done();
  expect_continue_ = !req_->is_done() && s_->http11_ && ascii_iequals(m[bhttp::field::expect], "100-continue");
  if (req_->content_length()) {
    up_framing_ = BodyFraming::length;
  } else if (req_->chunked()) {
    up_framing_ = BodyFraming::chunked;
  }
  keep_client_ = s_->keep_alive_;
  touch();
  arm_idle_timer();
  arm_response_timer();  // covers the connect and the head; re-armed once the body is sent
  if (!up_.fd) return upstream_failed(502, "The app has no connection to offer.");
  // A request that may go again on a fresh connection: nothing of it is lost with a stale socket.
  const auto method = m.method();
  retryable_ = up_.reused && up_.reconnect && req_->is_done() && !upgrade_ &&
               (method == bhttp::verb::get || method == bhttp::verb::head || method == bhttp::verb::options ||
                method == bhttp::verb::put || method == bhttp::verb::delete_ || method == bhttp::verb::trace);
  attach(std::move(up_.fd));
}

void ProxyExchange::attach(UpstreamSocket socket) {
  if (socket.parked_) {
    // Registered and non-blocking already, and connected: the head goes out at once.
    up_.reused = true;
    auto& parked = *std::static_pointer_cast<Parked>(socket.parked_)->descriptor;
    if (&net::query(parked.get_executor(), net::execution::context) ==
        &net::query(upstream_.get_executor(), net::execution::context)) {
      upstream_ = std::move(parked);
    } else {
      // Parked by a connection of another io thread: a moved descriptor would take that
      // thread's executor along, so it is re-registered here instead.
      beast::error_code ec;
      upstream_.assign(parked.release(), ec);
      if (ec) return upstream_failed(502, "The app's connection is unusable.");
    }
    return on_connected({});
  }
  beast::error_code ec;
  upstream_.assign(socket.fd_.release(), ec);
  if (ec) return upstream_failed(502, "The app's connection is unusable.");
  // A socket that carried a request is connected: the head goes out at once.
  if (up_.reused) return on_connected({});
  upstream_.async_wait(net::posix::stream_descriptor::wait_write,
                       on_strand([self = shared_from_this()](beast::error_code e) { self->on_connected(e); }));
}

void ProxyExchange::cut() { conclude(Handoff::close); }

void ProxyExchange::on_connected(beast::error_code ec) {
  if (ended_ || upstream_closed_) return;
  int err = 0;
  socklen_t len = sizeof err;
  if (!ec && !up_.reused && ::getsockopt(upstream_.native_handle(), SOL_SOCKET, SO_ERROR, &err, &len) != 0 && errno != ENOTSOCK) {
    err = errno;
  }
  if (ec || err != 0) return upstream_failed(502, "The app is not accepting connections.");
  touch();
  if (up_head_.empty()) {
    auto& m = req_->get();
    HeaderFields fields;
    for (const auto& f : m) fields.emplace_back(std::string(f.name_string()), std::string(f.value()));
    up_head_ = proxy_request_head(std::string_view(m.method_string()), up_, fields, upgrade_, up_framing_,
                                  req_->content_length().value_or(0));
  }
  send_head();
}

void ProxyExchange::send_head() {
  beast::error_code ec;
  std::size_t sent = send_now(upstream_.native_handle(), net::buffer(up_head_), ec);
  if (ec || sent == up_head_.size()) return on_head_sent(ec);
  net::async_write(upstream_, net::buffer(up_head_) + sent,
                   on_strand([self = shared_from_this()](beast::error_code e, std::size_t) { self->on_head_sent(e); }));
}

void ProxyExchange::on_head_sent(beast::error_code ec) {
  if (ended_ || upstream_closed_) return;
  if (ec) return retryable_ ? retry() : upstream_failed(502, "The app closed the connection.");
  touch();
  if (!expect_continue_) return begin_transfer();
  // Expect is not forwarded: the proxy itself invites the body, which the upstream then reads as usual.
  down_head_ = "HTTP/1.1 100 Continue\r\n\r\n";
  to_client(net::buffer(down_head_), [this] { begin_transfer(); });
}

void ProxyExchange::begin_transfer() {
  read_response_head();  // an upstream may answer before it has read the whole body
  if (req_->is_done()) return upload_complete();
  response_timer_.cancel();  // while the body goes up, only the idle timeout applies
  upload();
}

void ProxyExchange::upload() {
  auto& body = req_->get().body();
  body.data = up_chunk_.data();
  body.size = kChunk;
  client_reading_ = true;
  bhttp::async_read_some(s_->stream_, s_->buffer_, *req_,
                         [self = shared_from_this()](beast::error_code e, std::size_t) { self->on_client_body(e); });
}

void ProxyExchange::on_client_body(beast::error_code ec) {
  client_reading_ = false;
  if (ended_) return hand_off();
  if (ec == bhttp::error::need_buffer) ec = {};
  if (ec) return conclude(Handoff::close);  // the client left, or sent a malformed body
  if (upstream_closed_) return;
  touch();
  std::size_t got = kChunk - req_->get().body().size;
  bool last = req_->is_done();
  outcome_.request_bytes += got;
  up_frame_.clear();
  up_tail_.clear();
  if (up_framing_ == BodyFraming::chunked) chunk_framing(got, last, up_frame_, up_tail_);
  if (got == 0 && up_tail_.empty()) return last ? upload_complete() : upload();
  std::array<net::const_buffer, 3> bufs{net::buffer(up_frame_), net::buffer(up_chunk_.data(), got),
                                        net::buffer(up_tail_)};
  net::async_write(upstream_, bufs, on_strand([self = shared_from_this(), last](beast::error_code e, std::size_t) {
    if (self->ended_ || self->upstream_closed_) return;
    if (e) {
      // It stopped reading: it may have answered already (a refusal), so wait for that answer
      // (or its close, a 502); the rest of the body is never read and the connection ends.
      self->keep_client_ = false;
      if (!self->head_received_) self->arm_response_timer();
      return;
    }
    self->touch();
    if (last) return self->upload_complete();
    self->upload();
  }));
}

void ProxyExchange::upload_complete() {
  upload_done_ = true;
  if (response_done_) return conclude(Handoff::keep);
  if (!head_received_) arm_response_timer();
  if (!upgrade_) watch_client();  // a tunnel reads the client itself
}

void ProxyExchange::arm_response_timer() {
  response_timer_.expires_after(up_.response_timeout);
  response_timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
    if (ec || self->ended_ || self->head_received_) return;
    self->upstream_failed(504, fmt::format("The app did not answer within {} s.", self->up_.response_timeout.count()));
  });
}

void ProxyExchange::arm_idle_timer() {
  idle_timer_.expires_at(last_activity_ + up_.idle_timeout);
  idle_timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
    if (ec || self->ended_) return;
    if (std::chrono::steady_clock::now() - self->last_activity_ < self->up_.idle_timeout) return self->arm_idle_timer();
    if (!self->head_sent_ && self->upload_done_) return self->upstream_failed(504, "The app stopped answering.");
    if (!self->response_done_ && !self->tunnel_) self->outcome_.upstream_failed = self->upload_done_;
    self->conclude(Handoff::close);
  });
}

void ProxyExchange::close_upstream() {
  upstream_closed_ = true;
  beast::error_code ec;
  upstream_.close(ec);  // what is pending on it ends with operation_aborted
}

void ProxyExchange::retry() {
  retryable_ = false;
  up_.reused = false;
  beast::error_code ec;
  upstream_.close(ec);
  up_buffer_.clear();
  res_.reset();
  UniqueFd fd = up_.reconnect();
  if (!fd) return upstream_failed(502, "The app is not accepting connections.");
  attach(UpstreamSocket(std::move(fd)));
}

void ProxyExchange::upstream_failed(int status, std::string_view text) {
  if (ended_) return;
  outcome_.upstream_failed = true;
  close_upstream();
  if (head_sent_ || client_writing_) return conclude(Handoff::close);  // too late for an answer of our own
  // With the whole request read the connection can go on; else what is left of the body is drained.
  bool keep = keep_client_ && req_->is_done();
  outcome_.status = status;
  head_sent_ = true;
  down_head_ = proxy_error_message(status, text, !keep);
  to_client(net::buffer(down_head_), [this, keep] { conclude(keep ? Handoff::keep : Handoff::drain); });
}

bool ProxyExchange::upstream_reusable() const {
  return response_done_ && upload_done_ && !upstream_closed_ && !tunnel_ && !outcome_.upstream_failed && res_ &&
         res_->keep_alive() && !res_->need_eof() && up_buffer_.size() == 0;
}

void ProxyExchange::conclude(Handoff how) {
  if (ended_) return;
  ended_ = true;
  idle_timer_.cancel();
  response_timer_.cancel();
  if (upstream_reusable()) {
    beast::error_code ec;
    upstream_.cancel(ec);
    outcome_.reusable.parked_ = std::make_shared<Parked>(s_->srv_.proxy_gate, std::move(upstream_));
    outcome_.reusable.parked_on_ = &t_this_thread;
  } else if (!upstream_closed_) {
    close_upstream();
  }
  if (how == Handoff::keep && !keep_client_) how = Handoff::close;
  handoff_ = how;
  reported_ = true;
  auto done = std::move(up_.done);
  if (done) done(std::move(outcome_));
  if (how == Handoff::close) {
    handed_off_ = true;
    s_->proxy_.reset();
    s_->close();  // what of ours is pending on it ends with an error and finds the exchange over
    return;
  }
  if (client_busy()) {
    beast::error_code ec;
    s_->stream_.socket().cancel(ec);  // its handler hands the connection back
    return;
  }
  hand_off();
}

void ProxyExchange::hand_off() {
  if (handed_off_ || client_busy()) return;
  handed_off_ = true;
  s_->proxy_ended(handoff_ == Handoff::keep, handoff_ == Handoff::drain);
}

}  // namespace kiln::server::http
