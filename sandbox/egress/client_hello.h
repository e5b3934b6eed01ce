// The server name a TLS ClientHello asks for (SNI), read from the first bytes a CONNECT tunnel
// carries, so a tunnel opened for an allowed name cannot speak TLS to another one behind it.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace kiln::egress {

struct ClientHello {
  enum class State { need_more, not_tls, malformed, ok } state = State::need_more;
  std::optional<std::string> server_name;  // lower-cased; unset when the hello has no SNI
  std::string error;                       // for malformed
};

// `bytes` is everything received so far. need_more: wait for more (at most kMaxHelloBytes).
ClientHello parse_client_hello(std::string_view bytes);

inline constexpr std::size_t kMaxHelloBytes = 64 * 1024;

}  // namespace kiln::egress
