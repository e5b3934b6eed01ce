// Header checks of the Streamable HTTP transport (see rules.h for the choices).
#include "mcp/http/rules.h"
#include "core/ascii_text.h"

#include <arpa/inet.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <sodium.h>

#include "protocol/mcp_version.h"
#include "mcp/principal.h"

namespace kiln::server::mcp_http {
namespace {

constexpr auto trim = kiln::trim_header_space;
constexpr auto iequals = kiln::ascii_iequals;

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Splits "type/subtype; a=b; q=0.5" into the type and its parameters (names lower-cased).
struct MediaRange {
  std::string type;
  std::vector<std::pair<std::string, std::string>> params;
};

MediaRange parse_media(std::string_view item) {
  MediaRange m;
  auto semi = item.find(';');
  m.type = lower(trim(item.substr(0, semi)));
  while (semi != std::string_view::npos) {
    item.remove_prefix(semi + 1);
    semi = item.find(';');
    std::string_view p = trim(item.substr(0, semi));
    auto eq = p.find('=');
    if (eq == std::string_view::npos) continue;
    std::string_view v = trim(p.substr(eq + 1));
    if (v.size() >= 2 && v.front() == '"' && v.back() == '"') v = v.substr(1, v.size() - 2);
    m.params.emplace_back(lower(trim(p.substr(0, eq))), std::string(v));
  }
  return m;
}

bool zero_quality(const MediaRange& m) {
  for (const auto& [k, v] : m.params) {
    if (k != "q") continue;
    double q = 1;
    auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), q);
    return ec != std::errc() || q <= 0;
  }
  return false;
}

// "localhost", "127.0.0.1" or "[::1]" followed by nothing or ":digits"; the port, if any, in *port.
bool loopback_authority(std::string_view authority, std::string_view* port) {
  for (std::string_view name : {"localhost", "127.0.0.1", "[::1]"}) {
    if (authority.size() < name.size() || !iequals(authority.substr(0, name.size()), name)) continue;
    std::string_view rest = authority.substr(name.size());
    if (rest.empty()) {
      *port = {};
      return true;
    }
    if (rest.front() != ':' || rest.size() < 2 || rest.size() > 6) return false;
    rest.remove_prefix(1);
    if (!std::all_of(rest.begin(), rest.end(), [](unsigned char c) { return std::isdigit(c); })) return false;
    *port = rest;
    return true;
  }
  return false;
}

bool token68(std::string_view t) {
  return std::all_of(t.begin(), t.end(), [](unsigned char c) {
    return std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~' || c == '+' || c == '/' || c == '=';
  });
}

std::array<unsigned char, 32> hash_token(std::string_view token) {
  std::array<unsigned char, 32> out{};
  crypto_generichash(out.data(), out.size(), reinterpret_cast<const unsigned char*>(token.data()), token.size(),
                     nullptr, 0);
  return out;
}

}  // namespace

bool is_loopback_address(std::string_view numeric) {
  std::string text(numeric);
  unsigned char v4[4];
  if (::inet_pton(AF_INET, text.c_str(), v4) == 1) return v4[0] == 127;
  unsigned char v6[16];
  if (::inet_pton(AF_INET6, text.c_str(), v6) != 1) return false;
  static const unsigned char loopback[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (std::equal(v6, v6 + 16, loopback)) return true;
  return std::equal(v6, v6 + 12, mapped) && v6[12] == 127;
}

bool accepts(std::string_view accept, std::string_view media_type) {
  while (!accept.empty()) {
    auto comma = accept.find(',');
    MediaRange m = parse_media(accept.substr(0, comma));
    if (iequals(m.type, media_type) && !zero_quality(m)) return true;
    if (comma == std::string_view::npos) break;
    accept.remove_prefix(comma + 1);
  }
  return false;
}

bool is_json_content_type(std::string_view content_type) {
  MediaRange m = parse_media(content_type);
  if (m.type != "application/json") return false;
  for (const auto& [k, v] : m.params) {
    if (k == "charset" && !iequals(v, "utf-8")) return false;
  }
  return true;
}

bool is_loopback_host(std::string_view host, unsigned short port) {
  std::string_view p;
  if (!loopback_authority(trim(host), &p)) return false;
  return p.empty() || p == std::to_string(port);
}

bool is_loopback_origin(std::string_view origin) {
  std::string_view rest;
  if (origin.size() > 7 && iequals(origin.substr(0, 7), "http://")) {
    rest = origin.substr(7);
  } else if (origin.size() > 8 && iequals(origin.substr(0, 8), "https://")) {
    rest = origin.substr(8);
  } else {
    return false;  // "null", other schemes, garbage
  }
  std::string_view port;
  return loopback_authority(rest, &port);
}

bool origin_matches_host(std::string_view origin, std::string_view host) {
  host = trim(host);
  if (host.empty()) return false;
  for (std::string_view scheme : {"http://", "https://"}) {
    if (origin.size() == scheme.size() + host.size() && iequals(origin.substr(0, scheme.size()), scheme) &&
        iequals(origin.substr(scheme.size()), host)) {
      return true;
    }
  }
  return false;
}

bool is_supported_protocol_version(std::string_view version) {
  auto all = protocol::supported_protocol_versions();
  return std::find(all.begin(), all.end(), version) != all.end();
}

std::string supported_protocol_versions_text() {
  std::string out;
  for (auto v : protocol::supported_protocol_versions()) {
    if (!out.empty()) out += ", ";
    out += v;
  }
  return out;
}

bool version_requires_header(std::string_view version) { return version >= std::string_view("2025-06-18"); }

Result<TokenSet> TokenSet::load(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return fail(Errc::not_found, fmt::format("--token-file {}: cannot read it", path));
  if (!S_ISREG(st.st_mode)) return fail(Errc::invalid_argument, fmt::format("--token-file {}: not a regular file", path));
  if ((st.st_mode & 077) != 0) {
    return fail(Errc::invalid_argument,
                fmt::format("--token-file {}: other users may read or change it (mode {:o}); run chmod 600 {}", path,
                            st.st_mode & 0777, path));
  }
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  if (!in) return fail(Errc::io, fmt::format("--token-file {}: cannot read it", path));
  auto set = from_text(text.str());
  if (!set) return fail(set.error().code, fmt::format("--token-file {}: {}", path, set.error().message));
  return set;
}

Result<TokenSet> TokenSet::from_text(std::string_view text) {
  if (sodium_init() < 0) return fail(Errc::internal, "libsodium could not be initialised");
  TokenSet set;
  int line_no = 0;
  while (!text.empty()) {
    ++line_no;
    auto nl = text.find('\n');
    std::string_view line = trim(text.substr(0, nl));
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    if (line.empty() || line.front() == '#') continue;
    std::string name = fmt::format("token-{}", set.entries_.size() + 1);
    if (auto sp = line.find_first_of(" \t"); sp != std::string_view::npos) {
      std::string_view given = line.substr(0, sp);
      if (!valid_principal_name(given)) {
        return fail(Errc::invalid_argument,
                    fmt::format("line {}: the name before the token may hold only letters, digits and ._@- (1-64 "
                                "characters); write 'NAME TOKEN' or a bare token",
                                line_no));
      }
      name = std::string(given);
      line = trim(line.substr(sp + 1));
    }
    if (line.size() < 32) {
      return fail(Errc::invalid_argument,
                  fmt::format("line {}: a token must be at least 32 characters (make one with: openssl rand -hex 32)", line_no));
    }
    if (!token68(line)) {
      return fail(Errc::invalid_argument,
                  fmt::format("line {}: a token may hold only letters, digits and -._~+/=", line_no));
    }
    set.entries_.push_back(Entry{std::move(name), hash_token(line)});
  }
  if (set.entries_.empty()) return fail(Errc::invalid_argument, "no token in it (one per line: NAME TOKEN, or TOKEN)");
  return set;
}

Result<TokenSet> TokenSet::single(std::string_view principal, std::string_view token) {
  if (sodium_init() < 0) return fail(Errc::internal, "libsodium could not be initialised");
  if (token.size() < 32 || !token68(token)) return fail(Errc::invalid_argument, "the token is too short or malformed");
  TokenSet set;
  set.entries_.push_back(Entry{std::string(principal), hash_token(token)});
  return set;
}

std::optional<std::string> TokenSet::principal_for(std::string_view authorization) const {
  authorization = trim(authorization);
  if (authorization.size() < 7 || !iequals(authorization.substr(0, 7), "bearer ")) return std::nullopt;
  std::string_view token = trim(authorization.substr(7));
  if (token.empty()) return std::nullopt;
  auto h = hash_token(token);
  const Entry* match = nullptr;
  for (const auto& e : entries_) {
    bool same = sodium_memcmp(h.data(), e.hash.data(), h.size()) == 0;
    if (same && !match) match = &e;
  }
  if (!match) return std::nullopt;
  return match->principal;
}

}  // namespace kiln::server::mcp_http

namespace kiln::server::mcp_http {

std::optional<std::string> decode_mcp_header_value(std::string_view raw) {
  constexpr std::string_view kOpen = "=?base64?", kClose = "?=";
  if (raw.size() >= kOpen.size() + kClose.size() && raw.starts_with(kOpen) && raw.ends_with(kClose)) {
    std::string_view b64 = raw.substr(kOpen.size(), raw.size() - kOpen.size() - kClose.size());
    std::string out(b64.size(), '\0');
    std::size_t len = 0;
    if (sodium_base642bin(reinterpret_cast<unsigned char*>(out.data()), out.size(), b64.data(), b64.size(), nullptr,
                          &len, nullptr, sodium_base64_VARIANT_ORIGINAL) != 0) {
      return std::nullopt;
    }
    out.resize(len);
    return out;
  }
  for (char c : raw) {
    auto u = static_cast<unsigned char>(c);
    if (!(u == '\t' || (u >= 0x20 && u <= 0x7E))) return std::nullopt;
  }
  return std::string(raw);
}

const char* mcp_name_field(std::string_view method) {
  if (method == "tools/call" || method == "prompts/get") return "name";
  if (method == "resources/read") return "uri";
  if (method == "tasks/get" || method == "tasks/update" || method == "tasks/cancel") return "taskId";
  return nullptr;
}

}  // namespace kiln::server::mcp_http
