// The head of a request to the egress proxy: CONNECT host:port, or an absolute-form HTTP request
// (GET http://host/path) rewritten to what the origin expects. Strict: anything ambiguous (userinfo
// in the URL, obsolete line folding, bare LF, two lengths) is refused, not guessed at.
#pragma once

#include <string>
#include <string_view>

namespace kiln::egress {

struct ProxyRequest {
  bool connect = false;
  std::string method;
  std::string host;  // normalised (lower case, no trailing dot, IPv6 without [])
  int port = 0;
  // forward only: the head to send upstream, in origin form, with Host set from the URL, the
  // proxy's and hop-by-hop headers removed, and `Connection: close` (one request per upstream).
  std::string upstream_head;
  std::size_t head_bytes = 0;  // how much of the buffer the head took
};

struct HeadParse {
  enum class State { need_more, ok, refused } state = State::need_more;
  ProxyRequest request;
  int status = 400;     // for refused: the status to answer with
  std::string error;    // for refused: what was wrong and what to send instead
};

inline constexpr std::size_t kMaxProxyHead = 32 * 1024;

HeadParse parse_proxy_head(std::string_view buffer);

}  // namespace kiln::egress
