// IP addresses as the egress proxy checks them: parsed strictly (inet_pton, no "127.1" shorthands),
// classified into the ranges a sandbox must not reach by default, and compared by prefix.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

struct sockaddr;

namespace kiln::egress {

struct IpAddress {
  bool v6 = false;
  std::array<std::uint8_t, 16> bytes{};  // v4 in the first 4

  static std::optional<IpAddress> parse(std::string_view text);  // "1.2.3.4" or "::1" (no brackets)
  static std::optional<IpAddress> from_sockaddr(const sockaddr* sa);
  std::string to_string() const;
  bool in(const IpAddress& net, int prefix) const;
  // An IPv6 address carrying an IPv4 one (::ffff:a.b.c.d, 64:ff9b::/96 NAT64, ::a.b.c.d, 2002::/16
  // 6to4): the IPv4 address it reaches, so the checks see through the wrapping.
  std::optional<IpAddress> embedded_v4() const;
  bool operator==(const IpAddress&) const = default;
};

// Why an address is not public, or empty when it is. Loopback, RFC 1918, link-local, CGNAT,
// "this network", multicast, reserved, IPv6 unique-local/site-local, Teredo, and the cloud
// metadata addresses (which `metadata` reports separately: they stay refused even with
// allow_private unless listed as an address entry).
struct AddressClass {
  std::string non_public;  // "loopback", "private (RFC 1918)", ...; empty: public
  bool metadata = false;
};
AddressClass classify(const IpAddress& a);

}  // namespace kiln::egress
