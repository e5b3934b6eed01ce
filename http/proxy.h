// A streaming reverse proxy inside the listener: a route claims some requests by their head, a
// decision (possibly seconds later) either answers them itself or names an upstream socket, and
// the connection then moves the request and response between client and upstream with fixed
// buffers (proxy_exchange.cpp). Generic: it knows no apps, only sockets, targets and headers.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/unique_fd.h"
#include "http/message.h"

namespace kiln::server::http {

// An upstream socket between exchanges: a plain connected fd, or one a finished exchange handed
// back, which stays registered with the listener's io loop and set non-blocking, so the next
// exchange on it neither registers it again nor waits for a connect. Move-only; dropping it
// closes the socket (from any thread, also after the Server is gone).
class UpstreamSocket {
 public:
  UpstreamSocket() = default;
  explicit UpstreamSocket(UniqueFd fd) : fd_(std::move(fd)) {}
  explicit operator bool() const { return fd_ || parked_; }
  bool reused() const { return parked_ != nullptr; }
  // Parked by a connection of the calling thread. A pool should hand such a one out first: the
  // listener's io threads each have a loop of their own, and one parked by another thread is
  // re-registered before use (two epoll_ctl and an ioctl, about one proxied request in two with
  // two io threads). A hint only: any parked socket works on any thread.
  bool parked_here() const;

 private:
  friend class ProxyExchange;
  UniqueFd fd_;
  std::shared_ptr<void> parked_;  // the exchange's descriptor (proxy_exchange.cpp)
  const void* parked_on_ = nullptr;  // the parking thread's marker (proxy_exchange.cpp)
};

struct ProxyOutcome {
  int status = 0;  // what the client got (502/504 when the upstream failed); 0: nothing went out
  std::uint64_t request_bytes = 0;   // request body bytes forwarded upstream
  std::uint64_t response_bytes = 0;  // response body bytes forwarded to the client
  bool upstream_failed = false;  // connect refused, reset, close or timeout before a complete response
  bool upgraded = false;         // a 101 tunnel (WebSocket) ran
  // The upstream socket when it may carry another request (keep-alive, response complete, nothing
  // left over); else empty and closed.
  UpstreamSocket reusable;
};

struct ProxyUpstream {
  // A connected stream socket to the upstream (a fresh one may be non-blocking with its connect in
  // progress).
  UpstreamSocket fd;
  // `fd` already carried a request (a pooled keep-alive socket; always so for one a ProxyOutcome
  // handed back): the upstream may have closed it
  // meanwhile (its keep-alive ran out). If it ends before a byte of the answer, a request without
  // a body and with an idempotent method (RFC 9110 9.2.2) is sent once more on `reconnect()`'s
  // socket (empty: the client gets the 502).
  bool reused = false;
  std::function<UniqueFd()> reconnect;
  std::string target;  // the request-target to send (the caller already removed its prefix)
  // Lower-case names removed from the client's request besides the hop-by-hop ones, and name prefixes
  // ("x-kiln-"). A name in set_headers is removed from the client's request too.
  std::vector<std::string> drop_headers;
  std::vector<std::string> drop_prefixes;
  std::vector<std::pair<std::string, std::string>> set_headers;  // added after the drops
  // Cookie names (compared ignoring case) whose Set-Cookie from the upstream never reaches the
  // client, nor one with an empty name (a browser sends its value alone, "name=value" included).
  std::vector<std::string> drop_set_cookies;
  std::chrono::seconds response_timeout{60};  // from the whole request sent to the response head: else 504
  std::chrono::seconds idle_timeout{300};     // no byte either way for this long (body or tunnel): cut
  // Exactly once, when the exchange or tunnel ends, also when the client leaves half-way or the
  // server is torn down. Runs on an io thread (or the thread that destroys the Server): be quick.
  std::function<void(ProxyOutcome)> done;
};

struct ProxyDecision {  // exactly one of the two (an answer wins; an upstream beside it is reported failed)
  // Sent as is (a refusal, a login page, a redirect, 503); a request body still unread is drained
  // briefly and never forwarded.
  std::optional<Response> answer;
  std::optional<ProxyUpstream> upstream;
};

struct ProxyRoute {
  // On the io thread with the request-target alone (as sent), for every request no endpoint owns;
  // must be quick (an in-memory lookup). The target is all it gets so that a request it declines
  // (every static page) costs no copy of its head. A request it claims skips the endpoints, the
  // handler and the body limit.
  std::function<bool(std::string_view target)> claims;
  // With the head (body not read yet). Must call `reply` exactly once, from any thread, possibly
  // seconds later (an app waking up); a reply after the Server is destroyed is dropped (its
  // upstream's done still runs). The connection waits at most decide_timeout, then answers 504.
  std::function<void(const Request& head, std::function<void(ProxyDecision)> reply)> decide;
  std::chrono::seconds decide_timeout{120};
};

}  // namespace kiln::server::http
