// The reverse proxy's header rules: hop-by-hop fields out, the route's drops and sets applied, the
// framing rewritten for the hop it is sent on.
#include "http/proxy_headers.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/ascii_text.h"

namespace kiln::server::http {

namespace {

std::string lower_copy(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = ascii_lower(c);
  return out;
}

bool splits_line(std::string_view v) { return v.find_first_of("\r\n") != std::string_view::npos; }

void append_field(std::string& out, std::string_view name, std::string_view value) {
  if (splits_line(name) || splits_line(value)) return;  // never let a value split the head
  out.append(name).append(": ").append(value).append("\r\n");
}

void append_framing(std::string& out, BodyFraming framing, std::uint64_t length) {
  if (framing == BodyFraming::length) out.append(fmt::format("Content-Length: {}\r\n", length));
  if (framing == BodyFraming::chunked) out.append("Transfer-Encoding: chunked\r\n");
}

}  // namespace

std::vector<std::string> connection_listed(const HeaderFields& fields) {
  std::vector<std::string> out;
  for (const auto& [name, value] : fields) {
    if (!ascii_iequals(name, "connection")) continue;
    std::string_view rest = value;
    while (!rest.empty()) {
      auto comma = rest.find(',');
      std::string_view token = trim_header_space(rest.substr(0, comma));
      if (!token.empty()) out.push_back(lower_copy(token));
      rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    }
  }
  return out;
}

bool proxy_hop_by_hop(std::string_view name, const std::vector<std::string>& listed) {
  std::string n = lower_copy(name);
  for (std::string_view h : {"connection", "keep-alive", "te", "trailer", "transfer-encoding", "upgrade",
                             "content-length", "expect"}) {
    if (n == h) return true;
  }
  if (n.starts_with("proxy-")) return true;
  return std::find(listed.begin(), listed.end(), n) != listed.end();
}

std::string proxy_request_head(std::string_view method, const ProxyUpstream& up, const HeaderFields& fields,
                               bool upgrade, BodyFraming framing, std::uint64_t length) {
  std::string out = fmt::format("{} {} HTTP/1.1\r\n", method, up.target.empty() ? "/" : up.target);
  auto listed = connection_listed(fields);
  bool host = false;
  for (const auto& [name, value] : fields) {
    std::string n = lower_copy(name);
    if (proxy_hop_by_hop(n, listed)) continue;
    if (std::find(up.drop_headers.begin(), up.drop_headers.end(), n) != up.drop_headers.end()) continue;
    if (std::any_of(up.drop_prefixes.begin(), up.drop_prefixes.end(),
                    [&](const std::string& p) { return n.starts_with(p); })) {
      continue;
    }
    if (std::any_of(up.set_headers.begin(), up.set_headers.end(),
                    [&](const auto& s) { return ascii_iequals(s.first, n); })) {
      continue;
    }
    host = host || n == "host";
    append_field(out, name, value);
  }
  for (const auto& [name, value] : up.set_headers) {
    host = host || ascii_iequals(name, "host");
    append_field(out, name, value);
  }
  if (!host) out.append("Host: localhost\r\n");  // HTTP/1.1 requires one; an HTTP/1.0 client may send none
  if (upgrade) {
    for (const auto& [name, value] : fields) {
      if (ascii_iequals(name, "upgrade")) append_field(out, "Upgrade", value);
    }
    out.append("Connection: Upgrade\r\n");
  }
  append_framing(out, framing, length);
  out.append("\r\n");
  return out;
}

bool set_cookie_dropped(std::string_view value, const std::vector<std::string>& names) {
  std::string_view pair = value.substr(0, value.find(';'));
  auto eq = pair.find('=');
  if (eq == std::string_view::npos) return true;  // all value, no name
  std::string_view name = pair.substr(0, eq);
  constexpr std::string_view kSpace = " \t";
  auto first = name.find_first_not_of(kSpace);
  if (first == std::string_view::npos) return true;
  name = name.substr(first, name.find_last_not_of(kSpace) - first + 1);
  for (const auto& n : names) {
    if (ascii_iequals(name, n)) return true;
  }
  return false;
}

std::string proxy_response_head(int status, std::string_view reason, const HeaderFields& fields, BodyFraming framing,
                                std::uint64_t length, bool close, const std::vector<std::string>& drop_set_cookies) {
  if (reason.empty() || splits_line(reason)) reason = reason_phrase(status);
  std::string out = fmt::format("HTTP/1.1 {} {}\r\n", status, reason);
  auto listed = connection_listed(fields);
  for (const auto& [name, value] : fields) {
    bool keep_length = framing == BodyFraming::none && ascii_iequals(name, "content-length");
    bool keep_upgrade = status == 101 && ascii_iequals(name, "upgrade");
    if (!keep_length && !keep_upgrade && proxy_hop_by_hop(name, listed)) continue;
    if (!drop_set_cookies.empty() && ascii_iequals(name, "set-cookie") && set_cookie_dropped(value, drop_set_cookies))
      continue;
    append_field(out, name, value);
  }
  append_framing(out, framing, length);
  if (status == 101) {
    out.append("Connection: Upgrade\r\n");
  } else if (close) {
    out.append("Connection: close\r\n");
  }
  out.append("\r\n");
  return out;
}

void chunk_framing(std::size_t size, bool last, std::string& before, std::string& after) {
  before.clear();
  after.clear();
  if (size > 0) {
    before = fmt::format("{:x}\r\n", size);
    after = "\r\n";
  }
  if (last) after.append("0\r\n\r\n");
}

std::string proxy_error_message(int status, std::string_view text, bool close) {
  std::string body = fmt::format("{} {}: {}\n", status, reason_phrase(status), text);
  return fmt::format("HTTP/1.1 {} {}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\n{}\r\n{}",
                     status, reason_phrase(status), body.size(), close ? "Connection: close\r\n" : "", body);
}

}  // namespace kiln::server::http
