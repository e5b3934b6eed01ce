// Address parsing and the non-public ranges (RFC 6890's special-purpose registries, the parts a
// sandbox reaching out could abuse: the host, its LAN, its cloud's metadata service).
#include "sandbox/egress/ip_address.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstring>

namespace kiln::egress {

namespace {

IpAddress v4(std::uint8_t a, std::uint8_t b, std::uint8_t c, std::uint8_t d) {
  IpAddress r;
  r.bytes[0] = a, r.bytes[1] = b, r.bytes[2] = c, r.bytes[3] = d;
  return r;
}

IpAddress v6_prefix(std::initializer_list<std::uint8_t> head) {
  IpAddress r;
  r.v6 = true;
  std::size_t i = 0;
  for (auto b : head) r.bytes[i++] = b;
  return r;
}

AddressClass classify_v4(const IpAddress& a) {
  struct Range {
    IpAddress net;
    int prefix;
    const char* what;
  };
  static const Range ranges[] = {
      {v4(0, 0, 0, 0), 8, "\"this network\" (0.0.0.0/8)"},
      {v4(127, 0, 0, 0), 8, "loopback"},
      {v4(10, 0, 0, 0), 8, "private (RFC 1918)"},
      {v4(172, 16, 0, 0), 12, "private (RFC 1918)"},
      {v4(192, 168, 0, 0), 16, "private (RFC 1918)"},
      {v4(100, 64, 0, 0), 10, "carrier-grade NAT (RFC 6598)"},
      {v4(169, 254, 0, 0), 16, "link-local"},
      {v4(192, 0, 0, 0), 24, "IETF protocol assignments (192.0.0.0/24)"},
      {v4(198, 18, 0, 0), 15, "benchmarking (198.18.0.0/15)"},
      {v4(224, 0, 0, 0), 4, "multicast"},
      {v4(240, 0, 0, 0), 4, "reserved (240.0.0.0/4)"},
  };
  static const IpAddress metadata[] = {v4(169, 254, 169, 254), v4(169, 254, 170, 2), v4(100, 100, 100, 200),
                                       v4(192, 0, 0, 192)};
  AddressClass c;
  for (const auto& m : metadata)
    if (a == m) c.metadata = true;
  for (const auto& r : ranges)
    if (a.in(r.net, r.prefix)) {
      c.non_public = r.what;
      break;
    }
  if (c.metadata) c.non_public = "a cloud metadata address";
  return c;
}

}  // namespace

std::optional<IpAddress> IpAddress::parse(std::string_view text) {
  if (text.empty() || text.size() > 64) return std::nullopt;
  std::string s(text);
  IpAddress r;
  if (s.find(':') == std::string::npos) {
    if (::inet_pton(AF_INET, s.c_str(), r.bytes.data()) != 1) return std::nullopt;
    return r;
  }
  r.v6 = true;
  if (::inet_pton(AF_INET6, s.c_str(), r.bytes.data()) != 1) return std::nullopt;
  return r;
}

std::optional<IpAddress> IpAddress::from_sockaddr(const sockaddr* sa) {
  IpAddress r;
  if (sa->sa_family == AF_INET) {
    std::memcpy(r.bytes.data(), &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, 4);
    return r;
  }
  if (sa->sa_family == AF_INET6) {
    r.v6 = true;
    std::memcpy(r.bytes.data(), &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, 16);
    return r;
  }
  return std::nullopt;
}

std::string IpAddress::to_string() const {
  char buf[INET6_ADDRSTRLEN] = {};
  ::inet_ntop(v6 ? AF_INET6 : AF_INET, bytes.data(), buf, sizeof buf);
  return buf;
}

bool IpAddress::in(const IpAddress& net, int prefix) const {
  if (v6 != net.v6) return false;
  int full = prefix / 8, rest = prefix % 8;
  if (std::memcmp(bytes.data(), net.bytes.data(), std::size_t(full)) != 0) return false;
  if (!rest) return true;
  std::uint8_t mask = std::uint8_t(0xff << (8 - rest));
  return (bytes[std::size_t(full)] & mask) == (net.bytes[std::size_t(full)] & mask);
}

std::optional<IpAddress> IpAddress::embedded_v4() const {
  if (!v6) return std::nullopt;
  auto tail = [&](std::size_t at) { return v4(bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]); };
  static const IpAddress mapped = [] {
    IpAddress m = v6_prefix({});
    m.bytes[10] = m.bytes[11] = 0xff;
    return m;
  }();
  if (in(mapped, 96)) return tail(12);                                  // ::ffff:a.b.c.d
  if (in(v6_prefix({0x00, 0x64, 0xff, 0x9b}), 96)) return tail(12);     // NAT64 well-known prefix
  if (in(v6_prefix({0x00, 0x64, 0xff, 0x9b, 0x00, 0x01}), 48)) return tail(12);  // local-use NAT64
  if (in(v6_prefix({0x20, 0x02}), 16)) return tail(2);                  // 6to4
  IpAddress zero = v6_prefix({});
  if (in(zero, 96) && !in(zero, 127)) return tail(12);                  // ::a.b.c.d (deprecated)
  return std::nullopt;
}

AddressClass classify(const IpAddress& a) {
  if (!a.v6) return classify_v4(a);
  if (auto inner = a.embedded_v4()) {
    AddressClass c = classify_v4(*inner);
    if (!c.non_public.empty()) c.non_public += " (inside " + a.to_string() + ")";
    return c;
  }
  struct Range {
    IpAddress net;
    int prefix;
    const char* what;
  };
  static const IpAddress loopback = [] {
    IpAddress l = v6_prefix({});
    l.bytes[15] = 1;
    return l;
  }();
  static const IpAddress metadata = [] {  // fd00:ec2::254
    IpAddress m = v6_prefix({0xfd, 0x00, 0x0e, 0xc2});
    m.bytes[14] = 0x02, m.bytes[15] = 0x54;
    return m;
  }();
  static const Range ranges[] = {
      {v6_prefix({}), 128, "unspecified (::)"},
      {loopback, 128, "loopback"},
      {v6_prefix({0xfc}), 7, "unique-local (fc00::/7)"},
      {v6_prefix({0xfe, 0x80}), 10, "link-local"},
      {v6_prefix({0xfe, 0xc0}), 10, "site-local"},
      {v6_prefix({0xff}), 8, "multicast"},
      {v6_prefix({0x01, 0x00}), 64, "discard (100::/64)"},
      {v6_prefix({0x20, 0x01, 0x00, 0x00}), 32, "Teredo (2001::/32)"},
      {v6_prefix({0x20, 0x01, 0x00, 0x02, 0x00, 0x00}), 48, "benchmarking (2001:2::/48)"},
  };
  AddressClass c;
  if (a == metadata) {
    c.metadata = true;
    c.non_public = "a cloud metadata address";
    return c;
  }
  for (const auto& r : ranges)
    if (a.in(r.net, r.prefix)) {
      c.non_public = r.what;
      break;
    }
  return c;
}

}  // namespace kiln::egress
