// Cron expressions for app schedules: a Vixie-cron parser, and a search for fire times that walks
// local wall-clock fields (skipping whole months, days and hours that cannot match) and only then
// maps each matching wall time to instants, where daylight saving follows cronie (see cron.h).
#include "serve/cron.h"

#include <time.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <chrono>
#include <compare>
#include <span>
#include <vector>

#include "core/ascii_text.h"

namespace kiln::server {

namespace {

// ---- Parsing ---------------------------------------------------------------------------------

constexpr std::string_view kFieldsHint =
    " (fields: minute hour day-of-month month day-of-week, e.g. \"0 8 * * *\" for 08:00 every day)";

constexpr std::array<std::string_view, 12> kMonthNames = {"jan", "feb", "mar", "apr", "may", "jun",
                                                          "jul", "aug", "sep", "oct", "nov", "dec"};
constexpr std::array<std::string_view, 7> kDayNames = {"sun", "mon", "tue", "wed", "thu", "fri", "sat"};

struct Field {
  std::string_view name;
  int lo, hi;
  std::string_view valid;
  std::span<const std::string_view> names;  // names[i] stands for lo + i
};

const std::array<Field, 5> kFields = {{
    {"minute", 0, 59, "0-59", {}},
    {"hour", 0, 23, "0-23", {}},
    {"day-of-month", 1, 31, "1-31", {}},
    {"month", 1, 12, "1-12 or jan-dec", kMonthNames},
    {"day-of-week", 0, 7, "0-7 (0 and 7 are Sunday) or sun-sat", kDayNames},
}};

struct Shortcut {
  std::string_view name, fields;
};
constexpr std::array<Shortcut, 7> kShortcuts = {{{"@hourly", "0 * * * *"},
                                                 {"@daily", "0 0 * * *"},
                                                 {"@midnight", "0 0 * * *"},
                                                 {"@weekly", "0 0 * * 0"},
                                                 {"@monthly", "0 0 1 * *"},
                                                 {"@yearly", "0 0 1 1 *"},
                                                 {"@annually", "0 0 1 1 *"}}};

// An error message without the `cron "..."` prefix and the fields hint, which parse_cron adds.
using FieldResult = std::expected<int, std::string>;

std::string quoted(std::string_view s) { return "\"" + std::string(s) + "\""; }

FieldResult parse_value(const Field& f, std::string_view s) {
  if (!s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    int v = 0;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || end != s.data() + s.size() || v < f.lo || v > f.hi)
      return std::unexpected(std::string(f.name) + " " + std::string(s) + " is out of range " + std::string(f.valid));
    return v;
  }
  for (std::size_t i = 0; i < f.names.size(); ++i)
    if (ascii_iequals(s, f.names[i])) return f.lo + static_cast<int>(i);
  if (s.empty())
    return std::unexpected(std::string(f.name) + " has an empty value where a number belongs (valid: " +
                           std::string(f.valid) + ")");
  return std::unexpected(std::string(f.name) + " " + quoted(s) + " is not a number" +
                         (f.names.empty() ? "" : " or a name") + " (valid: " + std::string(f.valid) + ")");
}

// One comma-separated element: `*`, N, N-M, each optionally followed by /STEP, into `bits`.
std::expected<void, std::string> parse_element(const Field& f, std::string_view e, std::uint64_t& bits) {
  std::string_view range = e, step_text;
  bool stepped = false;
  if (auto slash = e.find('/'); slash != std::string_view::npos) {
    range = e.substr(0, slash);
    step_text = e.substr(slash + 1);
    stepped = true;
  }
  int step = 1;
  if (stepped) {
    bool digits = !step_text.empty() &&
                  std::all_of(step_text.begin(), step_text.end(), [](char c) { return c >= '0' && c <= '9'; });
    auto [end, ec] = std::from_chars(step_text.data(), step_text.data() + step_text.size(), step);
    if (!digits || ec != std::errc() || end != step_text.data() + step_text.size() || step < 1)
      return std::unexpected(std::string(f.name) + " step " + quoted(step_text) +
                             " must be a whole number of 1 or more, as in */15");
  }
  int low = f.lo, high = f.hi;
  if (range != "*") {
    auto dash = range.find('-');
    auto first = parse_value(f, range.substr(0, dash));
    if (!first) return std::unexpected(first.error());
    low = high = *first;
    if (dash != std::string_view::npos) {
      auto second = parse_value(f, range.substr(dash + 1));
      if (!second) return std::unexpected(second.error());
      high = *second;
      // cronie's one wrap: a day-of-week range may end on Sunday written as 0 ("fri-sun").
      if (f.hi == 7 && high == 0 && low > 0) high = 7;
      if (low > high)
        return std::unexpected(std::string(f.name) + " range " + quoted(range) +
                               " is backwards; write the smaller number first, or two ranges such as " +
                               std::to_string(low) + "-" + std::to_string(f.hi) + "," + std::to_string(f.lo) + "-" +
                               std::to_string(high) + " (valid: " + std::string(f.valid) + ")");
    } else if (stepped) {
      return std::unexpected(std::string(f.name) + " " + quoted(e) + ": a step needs * or a range before it, as in */" +
                             std::to_string(step) + " or " + std::to_string(low) + "-" + std::to_string(f.hi) + "/" +
                             std::to_string(step));
    }
  }
  for (int v = low; v <= high; v += step) bits |= std::uint64_t{1} << v;
  return {};
}

std::expected<std::uint64_t, std::string> parse_field(const Field& f, std::string_view text) {
  std::uint64_t bits = 0;
  std::size_t start = 0;
  for (;;) {
    auto comma = text.find(',', start);
    auto e = text.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    if (e.empty())
      return std::unexpected(std::string(f.name) + " " + quoted(text) + " has an empty entry in its list (valid: " +
                             std::string(f.valid) + ", joined by commas)");
    if (auto r = parse_element(f, e, bits); !r) return std::unexpected(r.error());
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return bits;
}

template <std::size_t N>
std::bitset<N> to_bits(std::uint64_t v) {
  static_assert(N < 64);
  return std::bitset<N>(static_cast<unsigned long long>(v & ((1ull << N) - 1)));
}

bool is_blank(char c) { return c == ' ' || c == '\t'; }

std::vector<std::string_view> split_blanks(std::string_view s) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && is_blank(s[i])) ++i;
    std::size_t j = i;
    while (j < s.size() && !is_blank(s[j])) ++j;
    if (j > i) out.push_back(s.substr(i, j - i));
    i = j;
  }
  return out;
}

// ---- Wall-clock fields ---------------------------------------------------------------------------

struct Wall {
  int y, mon, d, h, min;
  auto operator<=>(const Wall&) const = default;
};

std::int64_t floor_div(std::int64_t a, std::int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

std::int64_t days_of(int y, int mon, int d) {
  using namespace std::chrono;
  return (sys_days(year(y) / month(static_cast<unsigned>(mon)) / 1) + days(d - 1)).time_since_epoch().count();
}

int days_in_month(int y, int mon) {
  using namespace std::chrono;
  return static_cast<int>(static_cast<unsigned>((year(y) / month(static_cast<unsigned>(mon)) / last).day()));
}

// Minutes since 1970-01-01 00:00 of the wall clock, as if it were UTC.
std::int64_t civil_minutes(const Wall& w) { return days_of(w.y, w.mon, w.d) * 1440 + w.h * 60 + w.min; }

Wall wall_at(std::int64_t civil_min) {
  using namespace std::chrono;
  std::int64_t day = floor_div(civil_min, 1440);
  int rem = static_cast<int>(civil_min - day * 1440);
  year_month_day ymd{sys_days(days(day))};
  return {static_cast<int>(ymd.year()), static_cast<int>(static_cast<unsigned>(ymd.month())),
          static_cast<int>(static_cast<unsigned>(ymd.day())), rem / 60, rem % 60};
}

Wall add_minutes(const Wall& w, std::int64_t n) { return wall_at(civil_minutes(w) + n); }

// The local UTC offset at instant t (0 where localtime_r cannot say, far outside any schedule).
std::int64_t offset_at(std::int64_t t) {
  time_t tt = static_cast<time_t>(t);
  struct tm tm {};
  if (localtime_r(&tt, &tm) == nullptr) return 0;
  return tm.tm_gmtoff;
}

std::int64_t wall_seconds(std::int64_t t) { return t + offset_at(t); }

bool day_matches(const CronSpec& s, int y, int mon, int d) {
  unsigned wd = std::chrono::weekday(std::chrono::sys_days(std::chrono::days(days_of(y, mon, d)))).c_encoding();
  bool dom = s.days_of_month[static_cast<std::size_t>(d)], dow = s.days_of_week[wd];
  return (s.dom_star || s.dow_star) ? (dom && dow) : (dom || dow);
}

template <std::size_t N>
int next_bit(const std::bitset<N>& b, int from) {
  for (int i = std::max(from, 0); i < static_cast<int>(N); ++i)
    if (b[static_cast<std::size_t>(i)]) return i;
  return -1;
}

template <std::size_t N>
int prev_bit(const std::bitset<N>& b, int from) {
  for (int i = std::min(from, static_cast<int>(N) - 1); i >= 0; --i)
    if (b[static_cast<std::size_t>(i)]) return i;
  return -1;
}

// Whether the day rule needs the day-of-month bit, so a search may jump to the next set one.
bool dom_required(const CronSpec& s) { return s.dom_star || s.dow_star; }

// The first wall minute >= w whose fields match, or nullopt past `limit`.
std::optional<Wall> next_match(const CronSpec& s, Wall w, const Wall& limit) {
  for (;;) {
    if (w > limit) return std::nullopt;
    if (!s.months[static_cast<std::size_t>(w.mon)]) {
      int m = next_bit(s.months, w.mon + 1);
      w = m < 0 ? Wall{w.y + 1, next_bit(s.months, 1), 1, 0, 0} : Wall{w.y, m, 1, 0, 0};
      continue;
    }
    if (w.d > days_in_month(w.y, w.mon)) {
      w = w.mon == 12 ? Wall{w.y + 1, 1, 1, 0, 0} : Wall{w.y, w.mon + 1, 1, 0, 0};
      continue;
    }
    if (!day_matches(s, w.y, w.mon, w.d)) {
      int d = dom_required(s) ? next_bit(s.days_of_month, w.d + 1) : w.d + 1;
      w = {w.y, w.mon, d < 0 ? 32 : d, 0, 0};
      continue;
    }
    if (!s.hours[static_cast<std::size_t>(w.h)]) {
      int h = next_bit(s.hours, w.h + 1);
      w = h < 0 ? Wall{w.y, w.mon, w.d + 1, 0, 0} : Wall{w.y, w.mon, w.d, h, 0};
      continue;
    }
    if (!s.minutes[static_cast<std::size_t>(w.min)]) {
      int m = next_bit(s.minutes, w.min + 1);
      if (m >= 0) w.min = m;
      else w = w.h == 23 ? Wall{w.y, w.mon, w.d + 1, 0, 0} : Wall{w.y, w.mon, w.d, w.h + 1, 0};
      continue;
    }
    return w;
  }
}

// The last wall minute <= w whose fields match, or nullopt before `limit`.
std::optional<Wall> prev_match(const CronSpec& s, Wall w, const Wall& limit) {
  for (;;) {
    if (w < limit) return std::nullopt;
    if (!s.months[static_cast<std::size_t>(w.mon)]) {
      int m = prev_bit(s.months, w.mon - 1), y = w.y;
      if (m < 1) {
        m = prev_bit(s.months, 12);
        --y;
      }
      w = {y, m, days_in_month(y, m), 23, 59};
      continue;
    }
    if (w.d < 1) {
      int y = w.mon == 1 ? w.y - 1 : w.y, m = w.mon == 1 ? 12 : w.mon - 1;
      w = {y, m, days_in_month(y, m), 23, 59};
      continue;
    }
    if (!day_matches(s, w.y, w.mon, w.d)) {
      int d = dom_required(s) ? prev_bit(s.days_of_month, w.d - 1) : w.d - 1;
      w = {w.y, w.mon, std::max(d, 0), 23, 59};
      continue;
    }
    if (!s.hours[static_cast<std::size_t>(w.h)]) {
      int h = prev_bit(s.hours, w.h - 1);
      w = h < 0 ? Wall{w.y, w.mon, w.d - 1, 23, 59} : Wall{w.y, w.mon, w.d, h, 59};
      continue;
    }
    if (!s.minutes[static_cast<std::size_t>(w.min)]) {
      int m = prev_bit(s.minutes, w.min - 1);
      if (m >= 0) w.min = m;
      else w = w.h == 0 ? Wall{w.y, w.mon, w.d - 1, 23, 59} : Wall{w.y, w.mon, w.d, w.h - 1, 59};
      continue;
    }
    return w;
  }
}

// ---- Wall times to instants ----------------------------------------------------------------------

// The largest clock change assumed (cronie treats a bigger jump as the clock being set).
constexpr std::int64_t kMaxShift = 3 * 3600;

// What one matching wall minute means in real time. `anchor` is its first occurrence, or for a
// time in a spring-forward gap the end of the gap: it never decreases as the wall time grows, and
// every instant in `at` lies in [anchor, anchor + kMaxShift], which bounds both searches.
struct Instants {
  std::int64_t anchor = 0;
  std::array<std::int64_t, 2> at{};
  int n = 0;
};

Instants instants_of(const CronSpec& s, const Wall& w) {
  const std::int64_t c = civil_minutes(w) * 60;
  // Any instant showing wall time c lies within 14 hours of c, so the offsets a day either side
  // (and at c) are the ones in force there, given at most one change in between.
  const std::array<std::int64_t, 3> offsets = {offset_at(c - 86400), offset_at(c), offset_at(c + 86400)};
  std::array<std::int64_t, 3> found{};
  int n = 0;
  for (std::int64_t o : offsets) {
    std::int64_t t = c - o;
    if (wall_seconds(t) == c && std::find(found.begin(), found.begin() + n, t) == found.begin() + n) found[n++] = t;
  }
  std::int64_t first = found[0], last = found[0];
  for (int i = 1; i < n; ++i) {
    first = std::min(first, found[static_cast<std::size_t>(i)]);
    last = std::max(last, found[static_cast<std::size_t>(i)]);
  }
  Instants r;
  if (n == 0) {
    // A gap: find the change itself, the first instant whose wall clock is past c.
    auto [lo_o, hi_o] = std::minmax_element(offsets.begin(), offsets.end());
    std::int64_t lo = c - *hi_o, hi = c - *lo_o;
    while (hi - lo > 1) {
      std::int64_t mid = lo + (hi - lo) / 2;
      (wall_seconds(mid) > c ? hi : lo) = mid;
    }
    r.anchor = floor_div(hi + 59, 60) * 60;
    if (!s.wildcard) r.at[r.n++] = r.anchor;  // cronie runs fixed-time jobs missed in the gap
    return r;
  }
  r.anchor = first;
  r.at[r.n++] = first;
  if (last != first && s.wildcard) r.at[r.n++] = last;  // a fixed-time spec fires at the first only
  return r;
}

std::int64_t civil_minute_of(std::int64_t t) { return floor_div(wall_seconds(t), 60); }

}  // namespace

Result<CronSpec> parse_cron(std::string_view text) {
  while (!text.empty() && is_blank(text.front())) text.remove_prefix(1);
  while (!text.empty() && is_blank(text.back())) text.remove_suffix(1);
  auto fail_with = [&](const std::string& what) {
    return fail(Errc::invalid_argument, "cron " + quoted(text) + ": " + what + std::string(kFieldsHint));
  };
  if (text.empty()) return fail_with("is empty");

  std::string_view fields_text = text;
  if (text.front() == '@') {
    auto it = std::find_if(kShortcuts.begin(), kShortcuts.end(), [&](const Shortcut& s) { return ascii_iequals(s.name, text); });
    if (it == kShortcuts.end())
      return fail_with(quoted(text) +
                       " is not a known shortcut; valid: @hourly @daily @midnight @weekly @monthly @yearly @annually");
    fields_text = it->fields;
  }
  auto parts = split_blanks(fields_text);
  if (parts.size() != 5)
    return fail_with("has " + std::to_string(parts.size()) + (parts.size() == 1 ? " field" : " fields") +
                     ", needs exactly 5 (the command goes in the schedule's \"run\")");

  std::array<std::uint64_t, 5> bits{};
  for (std::size_t i = 0; i < 5; ++i) {
    auto b = parse_field(kFields[i], parts[i]);
    if (!b) return fail_with(b.error());
    bits[i] = *b;
  }
  if (bits[4] & (std::uint64_t{1} << 7)) bits[4] = (bits[4] | 1) & ~(std::uint64_t{1} << 7);  // 7 is Sunday

  CronSpec s;
  s.minutes = to_bits<60>(bits[0]);
  s.hours = to_bits<24>(bits[1]);
  s.days_of_month = to_bits<32>(bits[2]);
  s.months = to_bits<13>(bits[3]);
  s.days_of_week = to_bits<7>(bits[4]);
  s.wildcard = parts[0].front() == '*' || parts[1].front() == '*';
  s.dom_star = parts[2].front() == '*';
  s.dow_star = parts[4].front() == '*';
  s.text = std::string(text);
  return s;
}

std::optional<std::int64_t> next_fire(const CronSpec& spec, std::int64_t after) {
  tzset();
  // Wall times before the one at `after` can still fire after it when the clock goes back around
  // then (soon: they come again; lately: `after` is in the repeat, its first pass still to come).
  std::int64_t start = civil_minute_of(after), off = offset_at(after);
  if (offset_at(after - kMaxShift) != off || offset_at(after + kMaxShift) != off) start -= kMaxShift / 60;
  Wall w = wall_at(start);
  Wall limit = w;
  limit.y += 5;

  std::optional<std::int64_t> best;
  for (auto m = next_match(spec, w, limit); m; m = next_match(spec, add_minutes(*m, 1), limit)) {
    Instants in = instants_of(spec, *m);
    if (best && in.anchor > *best) break;  // later wall times only fire later
    for (int i = 0; i < in.n; ++i)
      if (in.at[static_cast<std::size_t>(i)] > after && (!best || in.at[static_cast<std::size_t>(i)] < *best))
        best = in.at[static_cast<std::size_t>(i)];
  }
  return best;
}

std::optional<std::int64_t> latest_fire_between(const CronSpec& spec, std::int64_t since, std::int64_t now) {
  if (now <= since) return std::nullopt;
  tzset();
  // Wall times after the one at `now` may have fired already when the clock went back lately.
  std::int64_t start = civil_minute_of(now);
  if (offset_at(now - kMaxShift) != offset_at(now)) start += kMaxShift / 60;
  Wall limit = wall_at(civil_minute_of(since) - 2 * kMaxShift / 60);

  std::optional<std::int64_t> best;
  for (auto m = prev_match(spec, wall_at(start), limit); m; m = prev_match(spec, add_minutes(*m, -1), limit)) {
    Instants in = instants_of(spec, *m);
    if (in.anchor + kMaxShift <= best.value_or(since)) break;  // earlier wall times only fire earlier
    for (int i = 0; i < in.n; ++i) {
      std::int64_t t = in.at[static_cast<std::size_t>(i)];
      if (t > since && t <= now && (!best || t > *best)) best = t;
    }
  }
  return best;
}

}  // namespace kiln::server
