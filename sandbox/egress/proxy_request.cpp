// RFC 9112 request-line and field parsing for the two forms a forward proxy serves (3.2.2
// absolute-form, 3.2.3 authority-form), in one pass over a bounded buffer.
#include "sandbox/egress/proxy_request.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <vector>

#include <fmt/format.h>

#include "sandbox/egress/egress_policy.h"

namespace kiln::egress {

namespace {

bool tchar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = char(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

HeadParse refuse(int status, std::string why) {
  HeadParse h;
  h.state = HeadParse::State::refused;
  h.status = status;
  h.error = std::move(why);
  return h;
}

// host[:port] or [v6][:port]; false when malformed.
bool split_authority(std::string_view a, std::string& host, int& port, bool port_required) {
  std::string_view h = a, p;
  if (!a.empty() && a.front() == '[') {
    auto close = a.find(']');
    if (close == std::string_view::npos) return false;
    h = a.substr(0, close + 1);
    if (close + 1 < a.size()) {
      if (a[close + 1] != ':') return false;
      p = a.substr(close + 2);
    }
  } else if (auto colon = a.rfind(':'); colon != std::string_view::npos) {
    if (a.find(':') != colon) return false;  // a bare IPv6 literal needs [ ]
    h = a.substr(0, colon);
    p = a.substr(colon + 1);
  }
  if (p.empty()) {
    if (port_required) return false;
  } else {
    auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), port);
    if (ec != std::errc() || end != p.data() + p.size() || port < 1 || port > 65535) return false;
  }
  host = normalise_host(h);
  return !host.empty();
}

}  // namespace

HeadParse parse_proxy_head(std::string_view buf) {
  auto end = buf.find("\r\n\r\n");
  if (end == std::string_view::npos) {
    if (buf.size() > kMaxProxyHead) return refuse(431, "the request head is larger than 32 KiB");
    if (buf.find('\n') != std::string_view::npos && buf.find("\r\n") == std::string_view::npos)
      return refuse(400, "lines must end with CRLF");
    return {};
  }
  if (end + 4 > kMaxProxyHead) return refuse(431, "the request head is larger than 32 KiB");
  std::string_view head = buf.substr(0, end + 2);
  std::vector<std::string_view> lines;
  for (std::size_t at = 0; at < head.size();) {
    auto eol = head.find("\r\n", at);
    auto line = head.substr(at, eol - at);
    if (line.find('\n') != std::string_view::npos || line.find('\r') != std::string_view::npos ||
        line.find('\0') != std::string_view::npos)
      return refuse(400, "a bare CR, LF or NUL in the request head");
    lines.push_back(line);
    at = eol + 2;
  }
  if (lines.empty() || lines.size() > 101) return refuse(400, "a request head has a request line and at most 100 fields");
  // Request line.
  std::string_view rl = lines[0];
  auto sp1 = rl.find(' ');
  auto sp2 = rl.rfind(' ');
  if (sp1 == std::string_view::npos || sp1 == sp2) return refuse(400, "the request line is not METHOD TARGET HTTP/1.1");
  std::string_view method = rl.substr(0, sp1), target = rl.substr(sp1 + 1, sp2 - sp1 - 1), version = rl.substr(sp2 + 1);
  if (method.empty() || !std::all_of(method.begin(), method.end(), tchar) || target.empty() ||
      target.find(' ') != std::string_view::npos || (version != "HTTP/1.1" && version != "HTTP/1.0"))
    return refuse(400, "the request line is not METHOD TARGET HTTP/1.1");
  HeadParse out;
  out.state = HeadParse::State::ok;
  ProxyRequest& r = out.request;
  r.method = std::string(method);
  r.head_bytes = end + 4;

  // Fields.
  struct Field {
    std::string_view name, value;
    std::string lname;
  };
  std::vector<Field> fields;
  std::vector<std::string> connection_tokens;
  int lengths = 0;
  bool chunked = false;
  std::string first_length;
  for (std::size_t i = 1; i < lines.size(); ++i) {
    auto line = lines[i];
    if (!line.empty() && (line.front() == ' ' || line.front() == '\t')) return refuse(400, "obsolete line folding is refused");
    auto colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0) return refuse(400, "a header field without a name");
    auto name = line.substr(0, colon);
    if (!std::all_of(name.begin(), name.end(), tchar)) return refuse(400, "a header field name with a space or bad character");
    Field f{name, trim(line.substr(colon + 1)), lower(name)};
    if (f.lname == "content-length") {
      if (lengths++ && std::string(f.value) != first_length) return refuse(400, "two different Content-Length fields");
      first_length = std::string(f.value);
    }
    if (f.lname == "transfer-encoding") chunked = true;
    if (f.lname == "connection") {
      std::string v = lower(f.value);
      std::size_t at = 0;
      while (at <= v.size()) {
        auto comma = v.find(',', at);
        auto tok = trim(std::string_view(v).substr(at, comma == std::string::npos ? std::string::npos : comma - at));
        if (!tok.empty()) connection_tokens.emplace_back(tok);
        if (comma == std::string::npos) break;
        at = comma + 1;
      }
    }
    fields.push_back(std::move(f));
  }
  if (lengths && chunked) return refuse(400, "both Content-Length and Transfer-Encoding: the length is ambiguous");

  if (method == "CONNECT") {
    r.connect = true;
    if (!split_authority(target, r.host, r.port, true))
      return refuse(400, "CONNECT needs host:port (for example CONNECT registry.npmjs.org:443)");
    return out;
  }
  std::string lt = lower(target.substr(0, 8));
  if (lt.starts_with("https://"))
    return refuse(400, "an https:// URL must go through CONNECT (set HTTPS_PROXY; tools do this for you)");
  if (!lt.starts_with("http://"))
    return refuse(400, "this is Kiln's egress proxy: send absolute-form requests (GET http://host/path) or CONNECT host:port");
  std::string_view rest = target.substr(7);
  auto path_at = rest.find_first_of("/?#");
  std::string_view authority = rest.substr(0, path_at);
  std::string_view path = path_at == std::string_view::npos ? std::string_view("/") : rest.substr(path_at);
  if (authority.find('@') != std::string_view::npos)
    return refuse(400, "a URL with user@ in it is refused (it hides the real host); send credentials in a header");
  if (path.front() == '#') path = "/";
  if (auto hash = path.find('#'); hash != std::string_view::npos) path = path.substr(0, hash);
  r.port = 80;
  if (!split_authority(authority, r.host, r.port, false))
    return refuse(400, "the URL's host is not a valid host name or address");
  std::string upstream_path = path.front() == '?' ? "/" + std::string(path) : std::string(path);

  auto dropped = [&](const std::string& n) {
    static const char* hop[] = {"connection", "proxy-connection", "keep-alive", "proxy-authorization",
                                "proxy-authenticate", "te", "trailer", "upgrade", "host"};
    for (const char* h : hop)
      if (n == h) return true;
    return std::find(connection_tokens.begin(), connection_tokens.end(), n) != connection_tokens.end();
  };
  std::string h = fmt::format("{} {} {}\r\n", method, upstream_path, version);
  bool v6 = r.host.find(':') != std::string::npos;
  std::string host_field = v6 ? "[" + r.host + "]" : r.host;
  if (r.port != 80) host_field += ":" + std::to_string(r.port);
  h += "Host: " + host_field + "\r\n";
  for (const auto& f : fields) {
    if (dropped(f.lname)) continue;
    h.append(f.name).append(": ").append(f.value).append("\r\n");
  }
  h += "Connection: close\r\n\r\n";
  r.upstream_head = std::move(h);
  return out;
}

}  // namespace kiln::egress
