// Time, id, process-identity and cursor helpers of the trace store, kept apart so the store's SQL
// reads without them in the way.
#include "traces/trace_util.h"

#include <signal.h>
#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <ctime>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>

#include <fmt/format.h>

#include "core/proc_stat.h"
#include "traces/trace_store.h"

namespace kiln::traces {

std::string now_iso8601() {
  auto now = std::chrono::system_clock::now();
  return detail::format_iso8601_ms(
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count());
}

namespace detail {

namespace {

bool digits(std::string_view s, size_t pos, size_t n, int& out) {
  if (pos + n > s.size()) return false;
  out = 0;
  for (size_t i = pos; i < pos + n; ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    out = out * 10 + (s[i] - '0');
  }
  return true;
}

std::string read_first_line(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

constexpr char kB64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

std::string b64url_encode(std::string_view in) {
  std::string out;
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    uint32_t v = uint8_t(in[i]) << 16 | uint8_t(in[i + 1]) << 8 | uint8_t(in[i + 2]);
    out += {kB64[v >> 18], kB64[(v >> 12) & 63], kB64[(v >> 6) & 63], kB64[v & 63]};
  }
  if (i + 1 == in.size()) {
    uint32_t v = uint8_t(in[i]) << 16;
    out += {kB64[v >> 18], kB64[(v >> 12) & 63]};
  } else if (i + 2 == in.size()) {
    uint32_t v = uint8_t(in[i]) << 16 | uint8_t(in[i + 1]) << 8;
    out += {kB64[v >> 18], kB64[(v >> 12) & 63], kB64[(v >> 6) & 63]};
  }
  return out;
}

std::optional<std::string> b64url_decode(std::string_view in) {
  if (in.size() % 4 == 1) return std::nullopt;
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    const char* p = std::char_traits<char>::find(kB64, 64, c);
    if (!p) return std::nullopt;
    acc = (acc << 6) | uint32_t(p - kB64);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(char((acc >> bits) & 0xff));
    }
  }
  return out;
}

}  // namespace

std::optional<int64_t> parse_iso8601_ms(std::string_view s) {
  std::tm tm{};
  int y, mo, d, h = 0, mi = 0, sec = 0, ms = 0;
  if (!digits(s, 0, 4, y) || s.size() < 10 || s[4] != '-' || !digits(s, 5, 2, mo) || s[7] != '-' ||
      !digits(s, 8, 2, d))
    return std::nullopt;
  size_t pos = 10;
  int64_t offset_min = 0;
  if (pos < s.size()) {
    if (s[pos] != 'T' && s[pos] != 't' && s[pos] != ' ') return std::nullopt;
    if (!digits(s, pos + 1, 2, h) || pos + 3 >= s.size() || s[pos + 3] != ':' || !digits(s, pos + 4, 2, mi))
      return std::nullopt;
    pos += 6;
    if (pos < s.size() && s[pos] == ':') {
      if (!digits(s, pos + 1, 2, sec)) return std::nullopt;
      pos += 3;
      if (pos < s.size() && (s[pos] == '.' || s[pos] == ',')) {
        size_t n = 0, start = ++pos;
        // Beyond milliseconds the digits are read and ignored.
        while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') {
          if (n < 3) ms = ms * 10 + (s[pos] - '0');
          ++n, ++pos;
        }
        if (pos == start) return std::nullopt;
        for (; n < 3; ++n) ms *= 10;
      }
    }
    if (pos < s.size()) {
      if ((s[pos] == 'Z' || s[pos] == 'z') && pos + 1 == s.size()) {
        ++pos;
      } else if (s[pos] == '+' || s[pos] == '-') {
        int oh, om;
        if (!digits(s, pos + 1, 2, oh) || pos + 6 != s.size() || s[pos + 3] != ':' || !digits(s, pos + 4, 2, om))
          return std::nullopt;
        offset_min = (s[pos] == '-' ? -1 : 1) * (oh * 60 + om);
        pos += 6;
      }
    }
    if (pos != s.size()) return std::nullopt;
  }
  if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60) return std::nullopt;
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = sec;
  int64_t secs = int64_t(timegm(&tm)) - offset_min * 60;
  return secs * 1000 + ms;
}

std::string format_iso8601_ms(int64_t ms) {
  std::time_t secs = std::time_t(ms >= 0 ? ms / 1000 : (ms - 999) / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                     tm.tm_hour, tm.tm_min, tm.tm_sec, int(ms - int64_t(secs) * 1000));
}

std::string random_trace_id() {
  // getrandom per id: a generator seeded once would repeat its sequence in forked children.
  uint64_t v = 0;
  if (getrandom(&v, sizeof v, 0) != ssize_t(sizeof v)) {
    static thread_local std::mt19937_64 rng{std::random_device{}()};
    v = rng();
  }
  return fmt::format("tr_{:016x}", v);
}

bool valid_trace_id(std::string_view id) {
  if (id.size() != 19 || id.substr(0, 3) != "tr_") return false;
  for (char c : id.substr(3))
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

std::optional<int64_t> process_start_time(int64_t pid) {
  if (pid <= 0 || pid > std::numeric_limits<pid_t>::max()) return std::nullopt;
  auto t = kiln::process_start_time(pid_t(pid));
  if (!t) return std::nullopt;
  return int64_t(*t);
}

const ProcessIdentity& self_identity() {
  static const ProcessIdentity id = [] {
    ProcessIdentity p;
    p.pid = ::getpid();
    p.start_time = process_start_time(p.pid).value_or(0);
    p.boot_id = read_first_line("/proc/sys/kernel/random/boot_id");
    char ns[64] = {};
    if (ssize_t n = ::readlink("/proc/self/ns/pid", ns, sizeof ns - 1); n > 0) p.pid_ns.assign(ns, size_t(n));
    return p;
  }();
  return id;
}

bool owner_gone(const ProcessIdentity& owner) {
  const ProcessIdentity& self = self_identity();
  if (self.boot_id.empty()) {
    // No /proc: all that can be told is whether the pid exists.
    return owner.pid <= 0 || (::kill(pid_t(owner.pid), 0) != 0 && errno == ESRCH);
  }
  if (owner.boot_id != self.boot_id) return true;
  // A kiln in another container sharing the state dir: its pid cannot be checked from here, and
  // wrongly interrupting a live run is worse than leaving a dead one running until its side looks.
  if (!owner.pid_ns.empty() && owner.pid_ns != self.pid_ns) return false;
  auto start = process_start_time(owner.pid);
  return !start || *start != owner.start_time;
}

uint32_t fnv1a(std::string_view s, uint32_t h) {
  for (unsigned char c : s) h = (h ^ c) * 16777619u;
  return h;
}

std::string encode_cursor(const Cursor& c) {
  return b64url_encode(fmt::format("1|{}|{}|{:08x}", c.started_at, c.id, c.filter_hash));
}

std::optional<Cursor> decode_cursor(std::string_view s) {
  auto raw = b64url_decode(s);
  if (!raw) return std::nullopt;
  // "1|<started_at>|<id>|<8 hex>"; neither a time stamp nor an id holds '|'.
  std::string_view r = *raw;
  if (r.substr(0, 2) != "1|") return std::nullopt;
  r.remove_prefix(2);
  size_t a = r.find('|');
  size_t b = a == std::string_view::npos ? a : r.find('|', a + 1);
  if (b == std::string_view::npos || r.size() - b - 1 != 8) return std::nullopt;
  Cursor c;
  c.started_at = std::string(r.substr(0, a));
  c.id = std::string(r.substr(a + 1, b - a - 1));
  auto ms = parse_iso8601_ms(c.started_at);
  if (!ms || format_iso8601_ms(*ms) != c.started_at || !valid_trace_id(c.id)) return std::nullopt;
  for (char ch : r.substr(b + 1)) {
    int v = ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
    if (v < 0) return std::nullopt;
    c.filter_hash = c.filter_hash << 4 | uint32_t(v);
  }
  return c;
}

}  // namespace detail
}  // namespace kiln::traces
