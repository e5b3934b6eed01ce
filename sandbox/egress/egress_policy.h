// The network allowlist (TOOLS.md "Network allowlist"): which names and ports a sandbox may reach
// through Kiln's egress proxy, parsed with errors that name the field, and narrowed by the
// server-wide ceiling (`--network-allow FILE`) that a request can never widen.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "sandbox/egress/ip_address.h"

namespace kiln::egress {

// One `allow` or `deny` entry: a name ("registry.npmjs.org"), a wildcard ("*.example.com": any
// deeper name, not example.com itself), "*" (any name, never an IP literal), or an IP literal or
// CIDR ("203.0.113.7", "10.0.0.0/8", "[2001:db8::1]"), each with an optional ":PORT" or ":*".
struct Rule {
  std::string text;          // as written (normalised), for the 403 body and the log
  enum class Kind { exact, suffix, any_name, address } kind = Kind::exact;
  std::string name;          // exact: the name; suffix: ".example.com"
  IpAddress net;             // address: the network
  int prefix = 0;            // address: prefix length
  std::optional<int> port;   // unset: 80/443 in allow, every port in deny; 0: ":*" (any port)

  bool matches_host(std::string_view host, const std::optional<IpAddress>& literal) const;
  bool matches_port(int p, bool is_deny) const;
};

struct Policy {
  std::vector<Rule> allow, deny;
  bool allow_private = false;

  nlohmann::json to_json() const;
};

// One allow or deny entry; errors read "<where>: \"<entry>\" <why>", so kiln.json can name the
// entry by its JSON pointer ("kiln.json: /app/network/allow/0").
Result<Rule> parse_rule(std::string_view raw, const std::string& where);

// Parses the `network` object; `where` prefixes every message ("arguments: network",
// "kiln.json sandbox.network"). Unknown keys are refused, so a typo cannot widen nothing quietly.
Result<Policy> parse_policy(const nlohmann::json& j, const std::string& where);

struct Verdict {
  bool allowed = false;
  std::string reason;  // the rule that decided, in words ("allow *.example.com", "no allow entry matches")
};

// Lower-cases, drops one trailing dot, strips [] around an IPv6 literal; empty when the name is
// not a plausible host (bad characters, too long): such a request is refused before matching.
std::string normalise_host(std::string_view host);

// Reads a ceiling file (`kiln mcp --network-allow FILE`): one JSON object as `network` takes.
Result<Policy> load_policy_file(const std::string& path);

// The name check alone (no resolution): deny wins over allow; IP literals need an address entry.
Verdict decide(const Policy& p, std::string_view host, int port);

// A request's policy under the server's ceiling, and for an app also under the ceiling of the
// server that published it (kept with the version): allowed only when every one allows it.
struct Scope {
  Policy request;
  std::optional<Policy> ceiling;
  std::optional<Policy> publisher_ceiling;

  Verdict decide(std::string_view host, int port) const;
  bool allow_private() const {
    return request.allow_private && (!ceiling || ceiling->allow_private) &&
           (!publisher_ceiling || publisher_ceiling->allow_private);
  }
  // For a CONNECT whose first bytes are not TLS: only when the entry that allowed it names the
  // port explicitly (a raw tunnel to an API's own port), never through a default 80/443.
  bool explicit_port(std::string_view host, int port) const;
  // A deny address entry (the request's or the ceiling's) that covers an address a name resolved
  // to: `deny: ["10.0.0.0/8"]` keeps names pointing there out, not only the literal. Empty: none.
  std::optional<std::string> denied_address(const IpAddress& a, int port) const;
  nlohmann::json to_json() const;
};

}  // namespace kiln::egress
