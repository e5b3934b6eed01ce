// The reverse proxy's response side: the upstream's head rewritten for the client, its body streamed
// back through one 64 KiB buffer (by length, or re-chunked when the upstream chunks or closes), a
// watch on the client meanwhile, and the raw two-way pipe after a 101.
#include <limits>

#include <boost/asio/buffer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/read.hpp>
#include <fmt/format.h>

#include "http/proxy_exchange.h"

namespace kiln::server::http {

void ProxyExchange::read_response_head() {
  // Room for a whole small answer in one read (an empty flat_buffer reads 512 bytes at a time).
  if (up_buffer_.capacity() < kFirstRead) up_buffer_.reserve(kFirstRead);
  res_.emplace();
  res_->header_limit(static_cast<std::uint32_t>(kChunk));
  res_->body_limit(boost::optional<std::uint64_t>());
  if (head_request_) res_->skip(true);
  bhttp::async_read_header(upstream_, up_buffer_, *res_, on_strand([self = shared_from_this()](beast::error_code e, std::size_t) {
                             self->on_response_head(e);
                           }));
}

void ProxyExchange::on_response_head(beast::error_code ec) {
  if (ended_ || upstream_closed_) return;
  if (ec == bhttp::error::header_limit || ec == bhttp::error::buffer_overflow) {
    return upstream_failed(502, "The app's response head is too large.");
  }
  if (ec) {
    // A pooled socket the app closed while it sat idle: nothing of the request was taken.
    if (retryable_ && (ec == bhttp::error::end_of_stream || ec == net::error::connection_reset)) return retry();
    return upstream_failed(502, "The app closed the connection without answering.");
  }
  retryable_ = false;
  touch();
  auto& m = res_->get();
  int status = m.result_int();
  if (status / 100 == 1 && status != 101) return read_response_head();  // 100 Continue, 103 Early Hints: not relayed
  head_received_ = true;
  response_timer_.cancel();
  HeaderFields fields;
  for (const auto& f : m) fields.emplace_back(std::string(f.name_string()), std::string(f.value()));
  std::string reason(m.reason());
  if (status == 101) {
    if (!upgrade_) return upstream_failed(502, "The app switched protocols without being asked to.");
    return tunnel(fields, reason);
  }
  BodyFraming framing = BodyFraming::chunked;
  std::uint64_t length = 0;
  if (head_request_ || status == 204 || status == 304) {
    framing = BodyFraming::none;
  } else if (auto n = res_->content_length()) {
    framing = BodyFraming::length;
    length = *n;
  } else if (!s_->http11_) {
    framing = BodyFraming::until_close;  // an HTTP/1.0 client knows no chunks
    keep_client_ = false;
  }
  // An answer before the whole body was read ends the connection: the rest of it is never parsed.
  if (!upload_done_ || s_->srv_.stopping) keep_client_ = false;
  chunked_down_ = framing == BodyFraming::chunked;
  outcome_.status = status;
  head_sent_ = true;
  down_head_ = proxy_response_head(status, reason, fields, framing, length, !keep_client_, up_.drop_set_cookies);
  if (res_->is_done()) return to_client(net::buffer(down_head_), [this] { response_complete(); });
  head_pending_ = true;  // goes out in one write with the body that came along, if any
  download();
}

void ProxyExchange::download() {
  auto& body = res_->get().body();
  body.data = down_chunk_.data();
  body.size = kChunk;
  if (up_buffer_.size() > 0) {
    // What the last read brought beyond the head: parsed here, sparing a trip through the io loop.
    beast::error_code ec;
    while (up_buffer_.size() > 0 && body.size > 0 && !res_->is_done()) {
      std::size_t used = res_->put(up_buffer_.data(), ec);
      up_buffer_.consume(used);
      if (ec == bhttp::error::need_buffer || ec == bhttp::error::need_more) ec = {};
      if (ec || used == 0) break;
    }
    if (ec || body.size < kChunk || res_->is_done()) return on_upstream_body(ec);
  }
  if (head_pending_) {
    // Nothing of the body at hand: the head goes now, not once the app sends more.
    head_pending_ = false;
    return to_client(net::buffer(down_head_), [this] { download(); });
  }
  bhttp::async_read_some(upstream_, up_buffer_, *res_, on_strand([self = shared_from_this()](beast::error_code e, std::size_t) {
                           self->on_upstream_body(e);
                         }));
}

void ProxyExchange::on_upstream_body(beast::error_code ec) {
  if (ended_ || upstream_closed_) return;
  if (ec == bhttp::error::need_buffer) ec = {};
  if (ec) {
    outcome_.upstream_failed = true;
    return conclude(Handoff::close);  // the client sees the body end short
  }
  touch();
  std::size_t got = kChunk - res_->get().body().size;
  bool last = res_->is_done();
  outcome_.response_bytes += got;
  down_frame_.clear();
  down_tail_.clear();
  if (chunked_down_) chunk_framing(got, last, down_frame_, down_tail_);
  if (got == 0 && down_tail_.empty() && !head_pending_) return last ? response_complete() : download();
  std::array<net::const_buffer, 4> bufs{head_pending_ ? net::buffer(down_head_) : net::const_buffer(),
                                        net::buffer(down_frame_), net::buffer(down_chunk_.data(), got),
                                        net::buffer(down_tail_)};
  head_pending_ = false;
  to_client(bufs, [this, last] { last ? response_complete() : download(); });
}

void ProxyExchange::response_complete() {
  response_done_ = true;
  // It answered without taking the whole body: drain the rest briefly rather than reset the
  // connection under the answer.
  if (!upload_done_) return conclude(Handoff::drain);
  conclude(Handoff::keep);
}

void ProxyExchange::watch_client() {
  if (client_reading_ || response_done_ || s_->buffer_.size() >= kChunk) return;
  client_reading_ = true;
  s_->stream_.async_read_some(s_->buffer_.prepare(4096), [self = shared_from_this()](beast::error_code e, std::size_t n) {
    self->client_reading_ = false;
    self->s_->buffer_.commit(n);  // a request sent early stays for the session's parser
    if (self->ended_) return self->hand_off();
    // Closed or reset: the client gave up (as nginx does, a half-close counts as leaving).
    if (e) return self->conclude(Handoff::close);
    self->watch_client();
  });
}

void ProxyExchange::tunnel(const HeaderFields& fields, std::string_view reason) {
  tunnel_ = true;
  outcome_.upgraded = true;
  outcome_.status = 101;
  head_sent_ = true;
  keep_client_ = false;
  down_head_ = proxy_response_head(101, reason, fields, BodyFraming::none, 0, false, up_.drop_set_cookies);
  // What the upstream sent right behind its 101 goes first.
  auto early = up_buffer_.data();  // a flat buffer: one piece
  down_head_.append(static_cast<const char*>(early.data()), early.size());
  outcome_.response_bytes += up_buffer_.size();
  up_buffer_.consume(up_buffer_.size());
  to_client(net::buffer(down_head_), [this] {
    pipe_to_client();
    pipe_to_upstream();
  });
}

void ProxyExchange::pipe_to_upstream() {
  auto forward = [self = shared_from_this()](beast::error_code e, std::size_t n) {
    self->client_reading_ = false;
    if (self->ended_) return self->hand_off();
    if (e) return self->conclude(Handoff::close);
    self->touch();
    self->outcome_.request_bytes += n;
    net::async_write(self->upstream_, net::buffer(self->up_chunk_.data(), n), self->on_strand([self](beast::error_code w, std::size_t) {
      if (self->ended_) return;
      if (w) return self->conclude(Handoff::close);
      self->touch();
      self->pipe_to_upstream();
    }));
  };
  client_reading_ = true;
  // Bytes the client sent right behind its request head were buffered by the session's parser.
  if (std::size_t early = s_->buffer_.size(); early > 0) {
    std::size_t n = net::buffer_copy(net::buffer(up_chunk_.data(), kChunk), s_->buffer_.data());
    s_->buffer_.consume(n);
    return net::post(s_->executor(), [forward, n]() mutable { forward({}, n); });
  }
  s_->stream_.async_read_some(net::buffer(up_chunk_.data(), kChunk), std::move(forward));
}

void ProxyExchange::pipe_to_client() {
  upstream_.async_read_some(net::buffer(down_chunk_.data(), kChunk), on_strand([self = shared_from_this()](beast::error_code e, std::size_t n) {
    if (self->ended_) return;
    if (e) return self->conclude(Handoff::close);
    self->touch();
    self->outcome_.response_bytes += n;
    self->to_client(net::buffer(self->down_chunk_.data(), n), [raw = self.get()] { raw->pipe_to_client(); });
  }));
}

}  // namespace kiln::server::http
