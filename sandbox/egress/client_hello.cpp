// A bounds-checked reader of TLS records and the ClientHello (RFC 8446 4.1.2, RFC 6066 3). The
// handshake message may span several records; every length is checked before it is used.
#include "sandbox/egress/client_hello.h"

#include <cctype>
#include <cstdint>

namespace kiln::egress {

namespace {

struct Reader {
  std::string_view s;
  std::size_t at = 0;
  bool ok = true;
  std::size_t left() const { return s.size() - at; }
  std::uint32_t num(int n) {
    if (left() < std::size_t(n)) return ok = false, 0;
    std::uint32_t v = 0;
    for (int i = 0; i < n; ++i) v = (v << 8) | static_cast<std::uint8_t>(s[at++]);
    return v;
  }
  std::string_view take(std::size_t n) {
    if (left() < n) return ok = false, std::string_view();
    auto v = s.substr(at, n);
    at += n;
    return v;
  }
};

ClientHello bad(const char* why) {
  ClientHello h;
  h.state = ClientHello::State::malformed;
  h.error = why;
  return h;
}

}  // namespace

ClientHello parse_client_hello(std::string_view bytes) {
  ClientHello need;
  if (bytes.empty()) return need;
  if (static_cast<std::uint8_t>(bytes[0]) != 0x16) {
    ClientHello h;
    h.state = ClientHello::State::not_tls;
    return h;
  }
  // Reassemble the handshake layer from as many records as it takes.
  std::string hs;
  std::size_t at = 0;
  std::size_t want = 0;  // handshake message length once known (header included)
  while (true) {
    if (bytes.size() - at < 5) return bytes.size() >= kMaxHelloBytes ? bad("ClientHello too large") : need;
    auto type = static_cast<std::uint8_t>(bytes[at]);
    auto major = static_cast<std::uint8_t>(bytes[at + 1]);
    if (type != 0x16) return bad("a non-handshake record came before the ClientHello ended");
    if (major != 3) {
      if (at == 0) {
        ClientHello h;
        h.state = ClientHello::State::not_tls;
        return h;
      }
      return bad("bad record version");
    }
    std::size_t len = (std::size_t(static_cast<std::uint8_t>(bytes[at + 3])) << 8) | static_cast<std::uint8_t>(bytes[at + 4]);
    if (len == 0 || len > 16384 + 256) return bad("bad record length");
    if (bytes.size() - at - 5 < len) return at + 5 + len > kMaxHelloBytes ? bad("ClientHello too large") : need;
    hs.append(bytes.substr(at + 5, len));
    at += 5 + len;
    if (!want && hs.size() >= 4) {
      if (static_cast<std::uint8_t>(hs[0]) != 1) return bad("the first handshake message is not a ClientHello");
      want = 4 + ((std::size_t(static_cast<std::uint8_t>(hs[1])) << 16) |
                  (std::size_t(static_cast<std::uint8_t>(hs[2])) << 8) | static_cast<std::uint8_t>(hs[3]));
      if (want > kMaxHelloBytes) return bad("ClientHello too large");
    }
    if (want && hs.size() >= want) break;
  }
  Reader r{std::string_view(hs).substr(4, want - 4)};
  r.take(2 + 32);                 // legacy_version, random
  r.take(r.num(1));               // legacy_session_id
  r.take(r.num(2));               // cipher_suites
  r.take(r.num(1));               // legacy_compression_methods
  if (!r.ok) return bad("truncated ClientHello");
  ClientHello h;
  h.state = ClientHello::State::ok;
  if (r.left() == 0) return h;    // no extensions at all: no SNI
  Reader ext{r.take(r.num(2))};
  if (!r.ok) return bad("truncated extensions");
  bool seen = false;
  while (ext.left() > 0) {
    std::uint32_t type = ext.num(2);
    std::string_view body = ext.take(ext.num(2));
    if (!ext.ok) return bad("truncated extension");
    if (type != 0) continue;
    if (seen) return bad("two server_name extensions");
    seen = true;
    Reader sni{body};
    Reader list{sni.take(sni.num(2))};
    if (!sni.ok || sni.left() != 0) return bad("bad server_name extension");
    while (list.left() > 0) {
      std::uint32_t name_type = list.num(1);
      std::string_view name = list.take(list.num(2));
      if (!list.ok) return bad("bad server_name entry");
      if (name_type != 0) continue;
      if (h.server_name) return bad("two host names in server_name");
      std::string lower;
      for (char c : name) {
        if (c == '\0') return bad("NUL in server_name");
        lower += char(std::tolower(static_cast<unsigned char>(c)));
      }
      h.server_name = std::move(lower);
    }
  }
  return h;
}

}  // namespace kiln::egress
