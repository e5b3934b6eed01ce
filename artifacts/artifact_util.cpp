// Small pure pieces of the artifact store: names, content types, times and encodings. Kept apart
// so the store's files hold only the rules about versions, blobs and access.
#include <sodium.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <ctime>
#include <limits>
#include <utility>

#include <fmt/format.h>

#include "artifacts/artifact_internal.h"

namespace kiln::artifacts {

const char* to_string(Share s) {
  switch (s) {
    case Share::public_: return "public";
    case Share::password: return "password";
    case Share::invite: return "invite";
  }
  return "public";
}

std::optional<Share> parse_share(std::string_view s) {
  if (s == "public") return Share::public_;
  if (s == "password") return Share::password;
  if (s == "invite") return Share::invite;
  return std::nullopt;
}

bool valid_artifact_name(std::string_view name) {
  if (name.empty() || name.size() > 64 || name.front() == '-') return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'; });
}

bool valid_invite_name(std::string_view name) {
  if (name.empty() || name.size() > 64 || name.front() == ' ' || name.back() == ' ') return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           std::string_view(" ._@+-").find(c) != std::string_view::npos;
  });
}

std::string default_artifact_name(std::string_view rel_path, std::string_view root_path) {
  std::string_view p = rel_path;
  while (!p.empty() && p.back() == '/') p.remove_suffix(1);
  bool root = p.empty() || p == ".";
  if (root) {
    p = root_path;
    while (!p.empty() && p.back() == '/') p.remove_suffix(1);
  }
  if (auto slash = p.rfind('/'); slash != std::string_view::npos) p = p.substr(slash + 1);
  // "report.html" -> "report", but ".well-known" keeps its name.
  if (!root) {
    if (auto dot = p.rfind('.'); dot != std::string_view::npos && dot > 0) p = p.substr(0, dot);
  }
  std::string out;
  for (char c : p) {
    char l = (c >= 'A' && c <= 'Z') ? char(c - 'A' + 'a') : c;
    bool ok = (l >= 'a' && l <= 'z') || (l >= '0' && l <= '9');
    if (ok) out += l;
    else if (!out.empty() && out.back() != '-') out += '-';
  }
  while (!out.empty() && out.back() == '-') out.pop_back();
  if (out.size() > 64) out.resize(64);
  while (!out.empty() && out.back() == '-') out.pop_back();
  return out.empty() ? "site" : out;
}

std::string content_type_for(std::string_view path) {
  static constexpr std::array<std::pair<std::string_view, std::string_view>, 20> kTypes{{
      {"html", "text/html; charset=utf-8"},
      {"htm", "text/html; charset=utf-8"},
      {"css", "text/css; charset=utf-8"},
      {"js", "text/javascript; charset=utf-8"},
      {"mjs", "text/javascript; charset=utf-8"},
      {"json", "application/json; charset=utf-8"},
      {"map", "application/json; charset=utf-8"},
      {"svg", "image/svg+xml; charset=utf-8"},
      {"png", "image/png"},
      {"jpg", "image/jpeg"},
      {"jpeg", "image/jpeg"},
      {"gif", "image/gif"},
      {"webp", "image/webp"},
      {"ico", "image/x-icon"},
      {"txt", "text/plain; charset=utf-8"},
      {"md", "text/markdown; charset=utf-8"},
      {"xml", "application/xml; charset=utf-8"},
      {"pdf", "application/pdf"},
      {"wasm", "application/wasm"},
      {"woff2", "font/woff2"},
  }};
  auto slash = path.rfind('/');
  std::string_view base = slash == std::string_view::npos ? path : path.substr(slash + 1);
  auto dot = base.rfind('.');
  if (dot == std::string_view::npos) return "application/octet-stream";
  std::string ext(base.substr(dot + 1));
  for (auto& c : ext)
    if (c >= 'A' && c <= 'Z') c = char(c - 'A' + 'a');
  for (const auto& [e, type] : kTypes)
    if (e == ext) return std::string(type);
  return "application/octet-stream";
}

namespace detail {

std::string iso_utc(std::int64_t unix_s) {
  std::time_t t = std::time_t(unix_s);
  std::tm tm{};
  gmtime_r(&t, &tm);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
                     tm.tm_min, tm.tm_sec);
}

std::int64_t real_now_s() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string base64url(std::string_view bytes) {
  const int variant = sodium_base64_VARIANT_URLSAFE_NO_PADDING;
  std::string out(sodium_base64_ENCODED_LEN(bytes.size(), variant), '\0');
  sodium_bin2base64(out.data(), out.size(), reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), variant);
  out.resize(std::char_traits<char>::length(out.c_str()));
  return out;
}

std::optional<std::string> base64url_decode(std::string_view text) {
  std::string out(text.size() * 3 / 4 + 3, '\0');
  std::size_t len = 0;
  const char* end = nullptr;
  if (sodium_base642bin(reinterpret_cast<unsigned char*>(out.data()), out.size(), text.data(), text.size(), nullptr,
                        &len, &end, sodium_base64_VARIANT_URLSAFE_NO_PADDING) != 0 ||
      end != text.data() + text.size()) {
    return std::nullopt;
  }
  out.resize(len);
  return out;
}

std::string to_hex(const unsigned char* p, std::size_t n) {
  std::string out(n * 2 + 1, '\0');
  sodium_bin2hex(out.data(), out.size(), p, n);
  out.pop_back();
  return out;
}

std::string sha256_hex(std::string_view bytes) {
  unsigned char h[crypto_hash_sha256_BYTES];
  crypto_hash_sha256(h, reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
  return to_hex(h, sizeof h);
}

bool valid_sha256_hex(std::string_view s) {
  return s.size() == 64 &&
         std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

bool valid_manifest_path(std::string_view p) {
  if (p.empty() || p.size() > 4096) return false;
  std::size_t start = 0;
  while (start <= p.size()) {
    auto end = p.find('/', start);
    if (end == std::string_view::npos) end = p.size();
    std::string_view comp = p.substr(start, end - start);
    if (comp.empty() || comp == "." || comp == "..") return false;
    start = end + 1;
  }
  return p.find('\0') == std::string_view::npos;
}

std::int64_t add_seconds(std::int64_t now, std::int64_t s) {
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max() / 2;
  return s >= kMax - now ? kMax : now + s;
}

std::int64_t expiry_after(std::int64_t now, std::int64_t s) {
  // The clock has whole seconds: `now` may be 0.99 s old already, so the extra second makes a
  // share last at least `s` seconds, never less.
  return add_seconds(add_seconds(now, s), 1);
}

}  // namespace detail
}  // namespace kiln::artifacts
