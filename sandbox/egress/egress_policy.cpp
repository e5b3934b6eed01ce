// Parsing and matching of allowlist entries. Deny wins; a name never matches an address entry and
// "*" never matches an IP literal, so an allowlist of names cannot be walked around by numbers.
#include "sandbox/egress/egress_policy.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

namespace kiln::egress {

using nlohmann::json;

namespace {

constexpr std::size_t kMaxEntries = 512;

bool name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_';
}

bool plausible_name(std::string_view s) {
  if (s.empty() || s.size() > 253 || s.front() == '.' || s.front() == '-') return false;
  if (s.find("..") != std::string_view::npos) return false;
  return std::all_of(s.begin(), s.end(), name_char);
}

std::optional<int> parse_port(std::string_view s) {
  int v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v < 1 || v > 65535) return std::nullopt;
  return v;
}

}  // namespace

Result<Rule> parse_rule(std::string_view raw, const std::string& where) {
  auto bad = [&](const std::string& why) {
    return fail(Errc::invalid_argument, fmt::format("{}: \"{}\" {}", where, std::string(raw.substr(0, 300)), why));
  };
  std::string s;
  for (char c : raw) s += char(std::tolower(static_cast<unsigned char>(c)));
  Rule r;
  std::string host = s;
  std::optional<std::string> port_text;
  if (!s.empty() && s.front() == '[') {
    auto close = s.find(']');
    if (close == std::string::npos) return bad("has an unclosed [ (write [2001:db8::1]:443)");
    host = s.substr(1, close - 1);
    if (close + 1 < s.size()) {
      if (s[close + 1] != ':') return bad("has text after ] that is not :PORT");
      port_text = s.substr(close + 2);
    }
  } else if (std::count(s.begin(), s.end(), ':') == 1) {
    auto colon = s.find(':');
    host = s.substr(0, colon);
    port_text = s.substr(colon + 1);
  } else if (std::count(s.begin(), s.end(), ':') > 1 && s.find('/') == std::string::npos) {
    host = s;  // a bare IPv6 literal: its port needs the [ ] form
  }
  if (port_text) {
    if (*port_text == "*") r.port = 0;
    else if (auto p = parse_port(*port_text)) r.port = *p;
    else return bad("has a port that is not 1-65535 or *");
  }
  // An address or a network.
  std::string addr = host;
  std::optional<int> prefix;
  if (auto slash = host.find('/'); slash != std::string::npos) {
    addr = host.substr(0, slash);
    int v = -1;
    auto tail = std::string_view(host).substr(slash + 1);
    auto [p, ec] = std::from_chars(tail.data(), tail.data() + tail.size(), v);
    if (ec != std::errc() || p != tail.data() + tail.size()) return bad("has a prefix length that is not a number");
    prefix = v;
  }
  if (auto ip = IpAddress::parse(addr)) {
    int max = ip->v6 ? 128 : 32;
    if (prefix && (*prefix < 0 || *prefix > max)) return bad(fmt::format("has a prefix length above {}", max));
    r.kind = Rule::Kind::address;
    r.net = *ip;
    r.prefix = prefix.value_or(max);
    r.text = s;
    return r;
  }
  if (prefix) return bad("is not an address, so it cannot have a /prefix");
  if (!host.empty() && host.back() == '.') host.pop_back();
  if (host == "*") {
    r.kind = Rule::Kind::any_name;
  } else if (host.starts_with("*.")) {
    if (!plausible_name(host.substr(2)) || host.find('*', 1) != std::string::npos)
      return bad("is not a wildcard of the form *.example.com");
    r.kind = Rule::Kind::suffix;
    r.name = host.substr(1);
  } else {
    if (!plausible_name(host))
      return bad("is not a host name, *.name, *, or an IP address (names use letters, digits, - . _)");
    r.kind = Rule::Kind::exact;
    r.name = host;
  }
  r.text = s;
  return r;
}

namespace {

Result<std::vector<Rule>> parse_rules(const json& j, const std::string& where) {
  std::vector<Rule> out;
  if (j.is_null()) return out;
  if (!j.is_array()) return fail(Errc::invalid_argument, fmt::format("{} must be an array of host names", where));
  if (j.size() > kMaxEntries)
    return fail(Errc::invalid_argument, fmt::format("{} has {} entries; at most {}", where, j.size(), kMaxEntries));
  for (std::size_t i = 0; i < j.size(); ++i) {
    std::string at = fmt::format("{}[{}]", where, i);
    if (!j[i].is_string()) return fail(Errc::invalid_argument, fmt::format("{} must be a string", at));
    auto r = parse_rule(j[i].get_ref<const std::string&>(), at);
    if (!r) return std::unexpected(r.error());
    out.push_back(std::move(*r));
  }
  return out;
}

}  // namespace

bool Rule::matches_host(std::string_view host, const std::optional<IpAddress>& literal) const {
  switch (kind) {
    case Kind::address: return literal && literal->in(net, prefix);
    case Kind::any_name: return !literal;
    case Kind::exact: return !literal && host == name;
    case Kind::suffix: return !literal && host.size() > name.size() && host.ends_with(name);
  }
  return false;
}

bool Rule::matches_port(int p, bool is_deny) const {
  if (!port) return is_deny || p == 80 || p == 443;
  return *port == 0 || *port == p;
}

std::string normalise_host(std::string_view host) {
  std::string s;
  if (host.size() > 255) return {};
  if (!host.empty() && host.front() == '[') {
    if (host.back() != ']') return {};
    host = host.substr(1, host.size() - 2);
    if (!IpAddress::parse(host) || !IpAddress::parse(host)->v6) return {};
  }
  for (char c : host) s += char(std::tolower(static_cast<unsigned char>(c)));
  if (!s.empty() && s.back() == '.') s.pop_back();
  if (IpAddress::parse(s)) return s;
  if (!plausible_name(s)) return {};
  return s;
}

Verdict decide(const Policy& p, std::string_view host, int port) {
  auto literal = IpAddress::parse(host);
  for (const auto& r : p.deny)
    if (r.matches_host(host, literal) && r.matches_port(port, true)) return {false, "deny " + r.text};
  for (const auto& r : p.allow)
    if (r.matches_host(host, literal) && r.matches_port(port, false)) return {true, "allow " + r.text};
  if (literal) return {false, "an IP address is refused unless an allow entry lists it"};
  for (const auto& r : p.allow)
    if (r.matches_host(host, literal))
      return {false, fmt::format("allow {} does not cover port {} (add \"{}:{}\")", r.text, port, host, port)};
  return {false, "no allow entry matches"};
}

json Policy::to_json() const {
  json a = json::array(), d = json::array();
  for (const auto& r : allow) a.push_back(r.text);
  for (const auto& r : deny) d.push_back(r.text);
  return json{{"allow", a}, {"deny", d}, {"allow_private", allow_private}};
}

Result<Policy> parse_policy(const json& j, const std::string& where) {
  if (!j.is_object())
    return fail(Errc::invalid_argument,
                fmt::format("{} must be \"none\", \"loopback\", \"host\" or an object like "
                            "{{\"allow\": [\"registry.npmjs.org\"]}}",
                            where));
  for (const auto& [k, v] : j.items())
    if (k != "allow" && k != "deny" && k != "allow_private")
      return fail(Errc::invalid_argument,
                  fmt::format("{}: unknown key \"{}\" (the keys are allow, deny, allow_private)", where, k.substr(0, 100)));
  Policy p;
  auto allow = parse_rules(j.value("allow", json()), where + ".allow");
  if (!allow) return std::unexpected(allow.error());
  auto deny = parse_rules(j.value("deny", json()), where + ".deny");
  if (!deny) return std::unexpected(deny.error());
  p.allow = std::move(*allow);
  p.deny = std::move(*deny);
  if (auto it = j.find("allow_private"); it != j.end() && !it->is_null()) {
    if (!it->is_boolean()) return fail(Errc::invalid_argument, fmt::format("{}.allow_private must be true or false", where));
    p.allow_private = it->get<bool>();
  }
  return p;
}

Result<Policy> load_policy_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return fail(Errc::not_found, fmt::format("cannot read the network ceiling {}", path));
  std::stringstream ss;
  ss << in.rdbuf();
  auto j = json::parse(ss.str(), nullptr, false);
  if (j.is_discarded())
    return fail(Errc::invalid_argument,
                fmt::format("{} is not JSON; write e.g. {{\"allow\": [\"registry.npmjs.org\"]}}", path));
  return parse_policy(j, path);
}

namespace {
constexpr const char* kCeiling = "the server's ceiling (--network-allow): ";
constexpr const char* kPublisherCeiling = "the ceiling of the session that published the app (--network-allow): ";
}  // namespace

Verdict Scope::decide(std::string_view host, int port) const {
  Verdict v = egress::decide(request, host, port);
  if (!v.allowed) return v;
  if (ceiling)
    if (Verdict c = egress::decide(*ceiling, host, port); !c.allowed) return {false, kCeiling + c.reason};
  if (publisher_ceiling)
    if (Verdict c = egress::decide(*publisher_ceiling, host, port); !c.allowed) return {false, kPublisherCeiling + c.reason};
  return v;
}

bool Scope::explicit_port(std::string_view host, int port) const {
  auto literal = IpAddress::parse(host);
  auto named = [&](const Policy& p) {
    return std::any_of(p.allow.begin(), p.allow.end(), [&](const Rule& r) {
      return r.matches_host(host, literal) && r.port && (*r.port == 0 || *r.port == port);
    });
  };
  return named(request) && (!ceiling || named(*ceiling)) && (!publisher_ceiling || named(*publisher_ceiling));
}

std::optional<std::string> Scope::denied_address(const IpAddress& a, int port) const {
  auto in = [&](const Policy& p) -> std::optional<std::string> {
    for (const auto& r : p.deny)
      if (r.kind == Rule::Kind::address && r.matches_host({}, a) && r.matches_port(port, true)) return "deny " + r.text;
    return std::nullopt;
  };
  if (auto r = in(request)) return r;
  if (ceiling)
    if (auto r = in(*ceiling)) return kCeiling + *r;
  if (publisher_ceiling)
    if (auto r = in(*publisher_ceiling)) return kPublisherCeiling + *r;
  return std::nullopt;
}

json Scope::to_json() const {
  json j = request.to_json();
  if (ceiling) j["ceiling"] = ceiling->to_json();
  if (publisher_ceiling) j["publisher_ceiling"] = publisher_ceiling->to_json();
  j["allow_private"] = allow_private();
  return j;
}

}  // namespace kiln::egress
