// One HTTP/1.1 connection of the listener. The reading side (limits, parsing, who answers) is in
// connection.cpp, the writing side (answers, files, streamed bodies) in connection_write.cpp.
// Pulls in Beast: include it from those two files only.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

#include "http/server_impl.h"

namespace kiln::server::http {

namespace beast = boost::beast;
namespace bhttp = beast::http;

class ChunkWriter;
class ProxyExchange;

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(Server::Impl& server, tcp::socket&& socket);
  ~Session();

  void start();

  net::any_io_executor executor() { return stream_.get_executor(); }

  // At shutdown: an idle connection closes now, a busy one after its answer; a stream never
  // ends by itself, so it is cut (SSE clients reconnect to whoever serves next).
  void nudge();

  // ---- streamed bodies (BodyStream calls these on the connection's strand) --------------------
  void stream_chunk(std::string bytes);

  void stream_end();

  // Set while the connection waits for a request head, reads a request body or drains a refused
  // one (steady-clock ticks since the head wait began), 0 otherwise; read from the accept strand
  // to pick whom to evict, and cleared there when picked. A body counts too: a peer trickling one
  // byte a second must not hold a slot that a real client needs.
  std::atomic<std::int64_t> head_wait_since{0};

  // On the connection's strand, after evict_oldest_waiting chose it.
  void evict();

 private:
  void read();

  // The body limit depends on who serves the path, so it is set between header and body.
  // What an endpoint can refuse without the body (Host, Origin, token, method, media type) is
  // refused here, before a byte of it is read.
  void on_header(beast::error_code ec, std::size_t n);

  void on_body(beast::error_code ec, std::size_t n);

  void not_evictable();

  // Everything of the request but its body, as the router and endpoints see it. `every_field`:
  // Request::headers too (endpoints and the proxy route read their own headers there; the
  // handler, which answers every static page, reads only the named fields and is spared it).
  Request head_request(const bhttp::request<bhttp::string_body>& m, bool every_field) const;

  static std::string size_text(std::size_t n);

  void on_read(beast::error_code ec, std::size_t);

  void fail(int status, std::string_view text);

  // A screen's refusal: the unread body is drained (briefly, and evictably), never parsed.
  void refuse_early(Response r);

  void format_head(const Response& r);

  void write(Response r);

  void server_error(const std::string& path);

  // Until the socket's send buffer is full, then wait for room (bounded by the write timeout).
  void send_file();

  void done();

  // After refusing a request whose rest is still arriving: closing with unread bytes would
  // send a reset that can destroy our answer in the client's buffer, so read them away first
  // (up to 64 KiB or 2 s).
  void drain();

  void drain_some(std::size_t total);

  // Headers go first in the same queue the producer's chunks join, so stream_start may write at
  // once. Meanwhile a read watches the peer: SSE clients leave by closing, and the producer must
  // hear of it (a session's GET stream is single) without waiting for the next write to fail.
  void start_stream(Response r);

  void watch_peer();

  void flush_stream();

  // Everything of a finished body is out: back to reading requests, once the peer watch let go.
  void finish_stream();

  void close();

  void end_streaming(bool cut);

  // ---- the reverse proxy (proxy_session.cpp; the exchange itself is http/proxy_exchange.h) ----
  friend class ProxyExchange;
  // A request the proxy route claimed: not evictable, no body limit, wait for its decision.
  void start_proxy(Request head);
  void on_decision(ProxyDecision& decision);
  // The exchange is over: read the next request (keep), drain what is left of this one, or close.
  void proxy_ended(bool keep, bool drain);

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
  std::weak_ptr<ProxyExchange> proxy_;
  int fd_ = -1;
  off_t file_offset_ = 0;
  std::uint64_t file_left_ = 0;
};

}  // namespace kiln::server::http
