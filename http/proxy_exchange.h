// One proxied exchange of a connection (http/proxy.h): the upstream socket, the request streamed to
// it and the response streamed back, or a 101 tunnel; fixed 64 KiB buffers each way, everything on
// the connection's strand. proxy_exchange.cpp has the request side and the end, proxy_response.cpp
// the response side. Pulls in Beast: include it from those files and proxy_session.cpp only.
#pragma once

#include <array>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <sys/socket.h>
#include <sys/uio.h>

#include <cerrno>

#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/beast/core/buffers_suffix.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/write.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/parser.hpp>

#include "http/connection.h"
#include "http/proxy_headers.h"

namespace kiln::server::http {

// Sends what the socket `fd` takes right now (never blocking, never raising SIGPIPE): the bytes
// sent, 0 when it would block (or `fd` is no socket); a failure sets `ec`. Writing first and
// waiting only when the socket is full spares the io loop a round (and a wake of another thread)
// per write: the common case is a small answer that fits at once.
template <class Buffers>
std::size_t send_now(int fd, const Buffers& bufs, beast::error_code& ec) {
  std::array<iovec, 8> iov{};
  std::size_t count = 0;
  for (auto it = net::buffer_sequence_begin(bufs); it != net::buffer_sequence_end(bufs) && count < iov.size(); ++it) {
    net::const_buffer b = *it;
    if (b.size() == 0) continue;
    iov[count].iov_base = const_cast<void*>(b.data());
    iov[count].iov_len = b.size();
    ++count;
  }
  if (count == 0) return 0;
  msghdr msg{};
  msg.msg_iov = iov.data();
  msg.msg_iovlen = count;
  ssize_t n = ::sendmsg(fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
  if (n >= 0) return static_cast<std::size_t>(n);
  if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ENOTSOCK) {
    ec = beast::error_code(errno, boost::system::system_category());
  }
  return 0;
}

class ProxyExchange : public std::enable_shared_from_this<ProxyExchange> {
 public:
  static constexpr std::size_t kChunk = 64 * 1024;
  static constexpr std::size_t kFirstRead = 16 * 1024;

  // Takes over the session's parsed request head (its body not read yet).
  ProxyExchange(std::shared_ptr<Session> session, ProxyUpstream upstream);
  ~ProxyExchange();  // reports to `done` if nothing did yet (the server torn down mid-way)
  ProxyExchange(const ProxyExchange&) = delete;
  ProxyExchange& operator=(const ProxyExchange&) = delete;

  void start();
  // The connection is closing under the exchange (hard shutdown): stop and report.
  void cut();

 private:
  // How the connection goes on once the exchange is over.
  enum class Handoff { keep, drain, close };

  // Registers the socket; a fresh one's connect is awaited first.
  void attach(UpstreamSocket socket);
  void on_connected(beast::error_code ec);
  // The reused socket was stale (closed before a byte of the answer): the same head on a new one.
  void retry();
  void send_head();  // up_head_, at once if the socket takes it
  void on_head_sent(beast::error_code ec);
  void begin_transfer();
  void upload();
  void on_client_body(beast::error_code ec);
  void upload_complete();
  void arm_response_timer();
  void arm_idle_timer();
  void touch() { last_activity_ = std::chrono::steady_clock::now(); }
  // The upstream failed: a 502/504 of our own if the client has had nothing yet, else a cut.
  void upstream_failed(int status, std::string_view text);
  void close_upstream();
  // Ends the exchange once: the upstream released or closed, `done` called, the connection handed
  // back as soon as no read or write of ours is pending on it.
  void conclude(Handoff how);
  void hand_off();
  bool client_busy() const { return client_reading_ || client_writing_; }
  // Writes to the client; `then` runs once it is out (right here when the socket takes it all at
  // once), a failure (the client left) ends the exchange. Always the caller's last step.
  template <class Buffers, class Then>
  void to_client(const Buffers& bufs, Then then) {
    beast::error_code ec;
    std::size_t sent = send_now(s_->stream_.socket().native_handle(), bufs, ec);
    if (ec) return conclude(Handoff::close);
    if (sent == net::buffer_size(bufs)) {
      touch();
      return then();
    }
    beast::buffers_suffix<Buffers> rest(bufs);
    rest.consume(sent);
    client_writing_ = true;
    net::async_write(s_->stream_, rest,
                     [self = shared_from_this(), then = std::move(then)](beast::error_code e, std::size_t) mutable {
                       self->client_writing_ = false;
                       if (self->ended_) return self->hand_off();
                       if (e) return self->conclude(Handoff::close);
                       self->touch();
                       then();
                     });
  }
  bool upstream_reusable() const;

  void read_response_head();
  void on_response_head(beast::error_code ec);
  void download();
  void on_upstream_body(beast::error_code ec);
  void response_complete();
  // While the answer is awaited or streams: a close or reset means the client left; a request sent
  // early stays buffered for the session.
  void watch_client();
  void tunnel(const HeaderFields& fields, std::string_view reason);
  void pipe_to_upstream();
  void pipe_to_client();

  // Every handler of an operation on upstream_ runs on the connection's strand: a reused
  // descriptor still carries the executor of the connection it was made for.
  template <class Handler>
  auto on_strand(Handler h) {
    return net::bind_executor(s_->executor(), std::move(h));
  }

  std::shared_ptr<Session> s_;
  ProxyUpstream up_;
  net::posix::stream_descriptor upstream_;
  beast::flat_buffer up_buffer_{2 * kChunk};  // the upstream's response head and what follows
  std::optional<bhttp::request_parser<bhttp::buffer_body>> req_;
  std::optional<bhttp::response_parser<bhttp::buffer_body>> res_;
  net::steady_timer idle_timer_;
  net::steady_timer response_timer_;
  std::chrono::steady_clock::time_point last_activity_;
  // Taken when first used, never zero-filled (most requests carry no body, and clearing 128 KiB
  // per request was a quarter of the proxy's time), and kept in a small per-thread pool after.
  struct Chunk {
    std::unique_ptr<char[]> bytes;
    char* data() {
      if (!bytes) bytes = take();
      return bytes.get();
    }
    Chunk() = default;
    Chunk(const Chunk&) = delete;
    Chunk& operator=(const Chunk&) = delete;
    ~Chunk();
    static std::unique_ptr<char[]> take();
  };
  Chunk up_chunk_;    // client -> upstream
  Chunk down_chunk_;  // upstream -> client
  std::string up_head_, up_frame_, up_tail_;
  std::string down_head_, down_frame_, down_tail_;
  BodyFraming up_framing_ = BodyFraming::none;
  ProxyOutcome outcome_;
  Handoff handoff_ = Handoff::close;
  bool reported_ = false;
  bool ended_ = false;
  bool handed_off_ = false;
  bool upstream_closed_ = false;
  bool client_reading_ = false;
  bool client_writing_ = false;
  bool upload_done_ = false;    // the whole request body went upstream
  bool head_received_ = false;  // the upstream's response head
  bool head_sent_ = false;      // a response head went to the client (or is about to, head_pending_)
  bool head_pending_ = false;   // down_head_ waits to go out with the first piece of the body
  bool response_done_ = false;
  bool chunked_down_ = false;
  bool upgrade_ = false;
  bool tunnel_ = false;
  bool head_request_ = false;
  bool expect_continue_ = false;
  bool keep_client_ = true;
  bool retryable_ = false;  // a stale reused socket may still be replaced (once, nothing of the answer seen)
};

}  // namespace kiln::server::http
