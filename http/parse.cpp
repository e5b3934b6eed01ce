// Parsers for the pieces of an HTTP request a router trusts nothing about: each one
// refuses or ignores malformed input rather than guessing, since guessing is how traversals pass.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <limits>

#include "core/ascii_text.h"
#include "http/parse.h"

namespace kiln::server::http {
namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

constexpr auto iequals = kiln::ascii_iequals;

std::optional<std::uint64_t> parse_u64(std::string_view s) {
  if (s.empty() || s.size() > 19) return std::nullopt;
  std::uint64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

template <class F>
void for_each_param(std::string_view query, F&& f) {
  while (!query.empty()) {
    auto amp = query.find('&');
    std::string_view part = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (part.empty()) continue;
    auto eq = part.find('=');
    f(part.substr(0, eq), eq == std::string_view::npos ? std::string_view() : part.substr(eq + 1), part);
  }
}

}  // namespace

std::optional<std::string> percent_decode(std::string_view s, bool plus_as_space) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '%') {
      if (i + 2 >= s.size()) return std::nullopt;
      int hi = hex_value(s[i + 1]), lo = hex_value(s[i + 2]);
      if (hi < 0 || lo < 0) return std::nullopt;
      out.push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else if (c == '+' && plus_as_space) {
      out.push_back(' ');
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::optional<Target> parse_target(std::string_view target, std::string* why) {
  auto refuse = [&](const char* reason) -> std::optional<Target> {
    if (why) *why = reason;
    return std::nullopt;
  };
  // Absolute-form (RFC 9112 3.2.2) must be accepted; the authority is the Host we ignore anyway.
  if (target.starts_with("http://") || target.starts_with("https://")) {
    auto slash = target.find('/', target.find("//") + 2);
    target = slash == std::string_view::npos ? std::string_view("/") : target.substr(slash);
  }
  if (target.empty() || target.front() != '/') return refuse("the request-target must start with '/'");
  if (target.find('#') != std::string_view::npos) return refuse("a fragment is not part of a request-target");
  // The query too: redirects echo it into Location (Beast refuses CTLs on the wire; this keeps the
  // router safe on its own).
  for (unsigned char c : target)
    if (c < 0x20 || c == 0x7f) return refuse("control characters in the request-target");
  Target t;
  auto q = target.find('?');
  t.raw_path = std::string(target.substr(0, q));
  if (q != std::string_view::npos) t.query = std::string(target.substr(q + 1));
  for (unsigned char c : t.raw_path) {
    if (c < 0x20 || c == 0x7f) return refuse("control characters in the path");
    if (c == '\\') return refuse("backslashes in the path");
  }
  std::string_view rest = std::string_view(t.raw_path).substr(1);
  t.trailing_slash = t.raw_path.size() > 1 && t.raw_path.back() == '/';
  if (t.trailing_slash) rest.remove_suffix(1);
  if (rest.empty()) return t;
  // Decoding segment by segment is what keeps "%2f" from turning into a separator.
  while (true) {
    auto slash = rest.find('/');
    std::string_view raw = rest.substr(0, slash);
    if (raw.empty()) return refuse("empty path segment ('//')");
    auto seg = percent_decode(raw);
    if (!seg) return refuse("malformed percent-escape in the path");
    for (unsigned char c : *seg) {
      if (c == 0) return refuse("NUL in the path");
      if (c < 0x20 || c == 0x7f) return refuse("control characters in the path");
      if (c == '\\') return refuse("an encoded backslash in the path");
      if (c == '/') return refuse("an encoded slash inside a path segment");
    }
    if (*seg == "." || *seg == "..") return refuse("'.' or '..' path segments");
    t.segments.push_back(std::move(*seg));
    if (slash == std::string_view::npos) break;
    rest = rest.substr(slash + 1);
  }
  return t;
}

std::optional<std::string> query_param(std::string_view query, std::string_view name) {
  std::optional<std::string> found;
  for_each_param(query, [&](std::string_view k, std::string_view v, std::string_view) {
    if (found || k != name) return;
    found = percent_decode(v, true);
    if (!found) found = std::string();
  });
  return found;
}

std::string query_without(std::string_view query, std::string_view name) {
  std::string out;
  for_each_param(query, [&](std::string_view k, std::string_view, std::string_view whole) {
    if (k == name) return;
    if (!out.empty()) out += '&';
    out += whole;
  });
  return out;
}

std::map<std::string, std::string> parse_form(std::string_view body) {
  std::map<std::string, std::string> out;
  for_each_param(body, [&](std::string_view k, std::string_view v, std::string_view) {
    auto key = percent_decode(k, true);
    auto val = percent_decode(v, true);
    if (key && val) out.emplace(std::move(*key), std::move(*val));
  });
  return out;
}

std::optional<std::string> cookie_value(std::string_view header, std::string_view name) {
  while (!header.empty()) {
    auto semi = header.find(';');
    std::string_view part = trim(header.substr(0, semi));
    header = semi == std::string_view::npos ? std::string_view() : header.substr(semi + 1);
    auto eq = part.find('=');
    if (eq == std::string_view::npos || trim(part.substr(0, eq)) != name) continue;
    std::string_view v = trim(part.substr(eq + 1));
    if (v.size() >= 2 && v.front() == '"' && v.back() == '"') v = v.substr(1, v.size() - 2);
    return std::string(v);
  }
  return std::nullopt;
}

std::optional<std::string> basic_password(std::string_view authorization) {
  authorization = trim(authorization);
  auto sp = authorization.find(' ');
  if (sp == std::string_view::npos || !iequals(authorization.substr(0, sp), "basic")) return std::nullopt;
  std::string_view b64 = trim(authorization.substr(sp + 1));
  std::string decoded;
  std::uint32_t acc = 0;
  int bits = 0;
  for (char c : b64) {
    int v;
    if (c >= 'A' && c <= 'Z') v = c - 'A';
    else if (c >= 'a' && c <= 'z') v = c - 'a' + 26;
    else if (c >= '0' && c <= '9') v = c - '0' + 52;
    else if (c == '+') v = 62;
    else if (c == '/') v = 63;
    else if (c == '=') break;
    else return std::nullopt;
    acc = (acc << 6) | static_cast<std::uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      decoded.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  auto colon = decoded.find(':');
  if (colon == std::string::npos) return std::nullopt;
  return decoded.substr(colon + 1);
}

bool etag_matches(std::string_view header, std::string_view etag) {
  auto opaque = [](std::string_view t) {
    t = trim(t);
    if (t.starts_with("W/")) t.remove_prefix(2);
    return t;
  };
  if (trim(header) == "*") return true;
  while (!header.empty()) {
    auto comma = header.find(',');
    if (opaque(header.substr(0, comma)) == opaque(etag)) return true;
    if (comma == std::string_view::npos) break;
    header = header.substr(comma + 1);
  }
  return false;
}

ByteRange parse_range(std::string_view header, std::uint64_t size) {
  header = trim(header);
  if (!header.starts_with("bytes=")) return {};
  std::string_view spec = trim(header.substr(6));
  if (spec.find(',') != std::string_view::npos) return {};  // several ranges: 200 with everything
  auto dash = spec.find('-');
  if (dash == std::string_view::npos) return {};
  std::string_view a = trim(spec.substr(0, dash)), b = trim(spec.substr(dash + 1));
  if (a.empty()) {  // suffix: the last n bytes
    auto n = parse_u64(b);
    if (!n) return {};
    if (*n == 0 || size == 0) return {ByteRange::unsatisfiable};
    std::uint64_t len = std::min(*n, size);
    return {ByteRange::partial, size - len, len};
  }
  auto first = parse_u64(a);
  if (!first) return {};
  std::uint64_t last = size == 0 ? 0 : size - 1;
  if (!b.empty()) {
    auto l = parse_u64(b);
    if (!l || *l < *first) return {};  // invalid, so ignored
    last = std::min(*l, last);
  }
  if (*first >= size) return {ByteRange::unsatisfiable};
  return {ByteRange::partial, *first, last - *first + 1};
}

bool cookie_safe(std::string_view v) {
  return !v.empty() && std::all_of(v.begin(), v.end(), [](unsigned char c) {
    return c > 0x20 && c < 0x7f && c != '"' && c != ',' && c != ';' && c != '\\';
  });
}

}  // namespace kiln::server::http
