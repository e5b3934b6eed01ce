// serve/cron.h: parsing app schedules' cron expressions (every error kind with its message), and
// their fire times in fixed zones, including daylight-saving gaps and overlaps in Europe/Berlin.
#include <doctest/doctest.h>

#include <stdlib.h>
#include <time.h>

#include <cstdio>
#include <filesystem>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "../skip.h"
#include "serve/cron.h"

using kiln::Errc;
using kiln::server::CronSpec;
using kiln::server::latest_fire_between;
using kiln::server::next_fire;
using kiln::server::parse_cron;

namespace {

// Sets TZ for one test case and puts the process's TZ back afterwards.
struct Zone {
  std::optional<std::string> saved;
  explicit Zone(const char* tz) {
    if (const char* old = getenv("TZ")) saved = old;
    setenv("TZ", tz, 1);
    tzset();
  }
  ~Zone() {
    if (saved) setenv("TZ", saved->c_str(), 1);
    else unsetenv("TZ");
    tzset();
  }
};

// glibc falls back to UTC for a zone it cannot find, so a missing zone file must skip, not pass.
std::string zone_missing(const std::string& name) {
  const char* dir = getenv("TZDIR");
  std::filesystem::path p = std::filesystem::path(dir ? dir : "/usr/share/zoneinfo") / name;
  return std::filesystem::exists(p) ? "" : p.string() + " is missing (install tzdata)";
}
bool no_berlin() {
  static const bool skip = kiln::test::skip_because("Europe/Berlin cron cases", zone_missing("Europe/Berlin"));
  return skip;
}
bool no_new_york() {
  static const bool skip = kiln::test::skip_because("America/New_York cron cases", zone_missing("America/New_York"));
  return skip;
}

CronSpec spec(const char* text) {
  auto s = parse_cron(text);
  const std::string why = std::string(text) + ": " + (s ? "" : s.error().message);
  INFO(why);
  REQUIRE(s.has_value());
  return *s;
}

std::string parse_error(const char* text) {
  auto s = parse_cron(text);
  if (s) return "(parsed)";
  CHECK(s.error().code == Errc::invalid_argument);
  return s.error().message;
}

// "2026-03-29 03:00 +0200" <-> unix seconds, so every expectation names its wall time and offset.
std::int64_t at(const char* text) {
  int y, mo, d, h, mi, off;
  REQUIRE(std::sscanf(text, "%d-%d-%d %d:%d %d", &y, &mo, &d, &h, &mi, &off) == 6);
  struct tm tm {};
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  int sign = off < 0 ? -1 : 1;
  off *= sign;
  return static_cast<std::int64_t>(timegm(&tm)) - sign * ((off / 100) * 3600 + (off % 100) * 60);
}

std::string show(std::optional<std::int64_t> t) {
  if (!t) return "never";
  time_t tt = static_cast<time_t>(*t);
  struct tm tm {};
  localtime_r(&tt, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M %z", &tm);
  return buf;
}

// The fire times in (from, to] by repeated next_fire.
std::vector<std::int64_t> chain(const CronSpec& s, std::int64_t from, std::int64_t to) {
  std::vector<std::int64_t> out;
  std::int64_t t = from;
  while (auto n = next_fire(s, t)) {
    if (*n > to) break;
    out.push_back(*n);
    t = *n;
  }
  return out;
}

std::vector<std::string> fires(const char* text, const char* from, const char* to) {
  std::vector<std::string> out;
  for (std::int64_t t : chain(spec(text), at(from), at(to))) out.push_back(show(t));
  return out;
}

// An independent model: cronie's main loop (src/cron.c), waking once per real minute and keeping a
// virtual clock in wall minutes, with its cases for a jump forward (fixed-time jobs catch up) and
// back (only wildcard jobs run until the wall clock is past where it was). The fire times in
// (from, to], for comparing with next_fire's chain.
bool wall_matches(const CronSpec& s, std::int64_t civil_minute) {
  time_t t = static_cast<time_t>(civil_minute * 60);
  struct tm tm {};
  gmtime_r(&t, &tm);
  bool dom = s.days_of_month[static_cast<std::size_t>(tm.tm_mday)], dow = s.days_of_week[static_cast<std::size_t>(tm.tm_wday)];
  return s.minutes[static_cast<std::size_t>(tm.tm_min)] && s.hours[static_cast<std::size_t>(tm.tm_hour)] &&
         s.months[static_cast<std::size_t>(tm.tm_mon + 1)] && ((s.dom_star || s.dow_star) ? (dom && dow) : (dom || dow));
}

std::int64_t wall_minute(std::int64_t t) {
  time_t tt = static_cast<time_t>(t);
  struct tm tm {};
  localtime_r(&tt, &tm);
  return (t + tm.tm_gmtoff) / 60;
}

std::vector<std::int64_t> cronie_fires(const CronSpec& s, std::int64_t from, std::int64_t to) {
  std::vector<std::int64_t> out;
  std::int64_t virtual_time = wall_minute(from);
  for (std::int64_t t = from + 60; t <= to; t += 60) {
    std::int64_t running = wall_minute(t), diff = running - virtual_time;
    bool fire = false;
    if (diff == 1) {
      fire = wall_matches(s, running);
      virtual_time = running;
    } else if (diff > 5) {  // "DST begins": wildcard jobs for now, fixed-time jobs for each minute missed
      fire = s.wildcard && wall_matches(s, running);
      for (std::int64_t v = virtual_time + 1; v <= running; ++v) fire = fire || (!s.wildcard && wall_matches(s, v));
      virtual_time = running;
    } else if (diff > 0) {  // woke up late: everything for each minute
      for (std::int64_t v = virtual_time + 1; v <= running; ++v) fire = fire || wall_matches(s, v);
      virtual_time = running;
    } else {  // "DST ends": wildcard jobs only, the virtual clock waits
      fire = s.wildcard && wall_matches(s, running);
    }
    if (fire) out.push_back(t);
  }
  return out;
}

// For each spec and each 12-hour window from `days`, next_fire's chain is cronie's.
void agrees_with_cronie(std::initializer_list<const char*> texts, std::initializer_list<const char*> days) {
  for (const char* text : texts)
    for (const char* day : days) {
      CronSpec s = spec(text);
      std::int64_t from = at(day), to = from + 12 * 3600;
      const std::string where = std::string(text) + " from " + day;
      INFO(where);
      CHECK(chain(s, from, to) == cronie_fires(s, from, to));
    }
}

std::string next(const char* text, const char* after) { return show(next_fire(spec(text), at(after))); }
std::string latest(const char* text, const char* since, const char* now) {
  return show(latest_fire_between(spec(text), at(since), at(now)));
}

}  // namespace

TEST_CASE("parse_cron: fields, lists, ranges, steps and names") {
  CronSpec s = spec("*/15 1-5/2 1,15,20-22 JAN-Mar mon-FRI");
  CHECK(s.minutes.to_ullong() == ((1ull << 0) | (1ull << 15) | (1ull << 30) | (1ull << 45)));
  CHECK(s.hours.to_ullong() == ((1ull << 1) | (1ull << 3) | (1ull << 5)));
  CHECK(s.days_of_month.to_ullong() == ((1ull << 1) | (1ull << 15) | (7ull << 20)));
  CHECK(s.months.to_ullong() == (7ull << 1));
  CHECK(s.days_of_week.to_ullong() == (31ull << 1));
  CHECK(s.wildcard);
  CHECK_FALSE(s.dom_star);
  CHECK_FALSE(s.dow_star);
  CHECK(s.text == "*/15 1-5/2 1,15,20-22 JAN-Mar mon-FRI");

  // 7 is Sunday, and a day-of-week range may end on Sunday written 0 or sun.
  CHECK(spec("0 0 * * 7").days_of_week.to_ullong() == 1);
  CHECK(spec("0 0 * * 5-7").days_of_week.to_ullong() == ((1ull << 5) | (1ull << 6) | 1));
  CHECK(spec("0 0 * * sat-sun").days_of_week.to_ullong() == ((1ull << 6) | 1));
  CHECK(spec("0 0 * * 5-0").days_of_week.to_ullong() == ((1ull << 5) | (1ull << 6) | 1));
  CHECK(spec("0 0 * * 1-7/2").days_of_week.to_ullong() == ((1ull << 1) | (1ull << 3) | (1ull << 5) | 1));

  // A step larger than its range leaves the first value, as in cronie.
  CHECK(spec("10-20/30 * * * *").minutes.to_ullong() == (1ull << 10));
  CHECK(spec("59 23 31 12 6").minutes[59]);

  // Blanks around and between fields; text keeps what was meant.
  CronSpec t = spec("  0\t8  * * *  ");
  CHECK(t.text == "0\t8  * * *");
  CHECK_FALSE(t.wildcard);
  CHECK(t.dom_star);
  CHECK(t.dow_star);

  // The day rule's "unrestricted" is Vixie's: the field starts with '*'.
  CHECK(spec("0 0 */2 * 1").dom_star);
  CHECK_FALSE(spec("0 0 1-31/2 * 1").dom_star);
  CHECK(spec("0 */2 * * *").wildcard);
  CHECK_FALSE(spec("0-59 2 * * *").wildcard);
}

TEST_CASE("parse_cron: shortcuts") {
  auto same = [](const char* shortcut, const char* fields) {
    CronSpec a = spec(shortcut), b = spec(fields);
    const std::string which = shortcut;
    INFO(which);
    CHECK(a.minutes == b.minutes);
    CHECK(a.hours == b.hours);
    CHECK(a.days_of_month == b.days_of_month);
    CHECK(a.months == b.months);
    CHECK(a.days_of_week == b.days_of_week);
    CHECK(a.dom_star == b.dom_star);
    CHECK(a.dow_star == b.dow_star);
    CHECK(a.wildcard == b.wildcard);
    CHECK(a.text == shortcut);
  };
  same("@hourly", "0 * * * *");
  same("@daily", "0 0 * * *");
  same("@midnight", "0 0 * * *");
  same("@weekly", "0 0 * * 0");
  same("@monthly", "0 0 1 * *");
  same("@yearly", "0 0 1 1 *");
  same("@annually", "0 0 1 1 *");
  same("@Daily", "0 0 * * *");
}

TEST_CASE("parse_cron: every error names the field and what is valid") {
  const std::string hint =
      " (fields: minute hour day-of-month month day-of-week, e.g. \"0 8 * * *\" for 08:00 every day)";
  CHECK(parse_error("61 * * * *") == "cron \"61 * * * *\": minute 61 is out of range 0-59" + hint);
  CHECK(parse_error("0 24 * * *") == "cron \"0 24 * * *\": hour 24 is out of range 0-23" + hint);
  CHECK(parse_error("0 0 0 * *") == "cron \"0 0 0 * *\": day-of-month 0 is out of range 1-31" + hint);
  CHECK(parse_error("0 0 * 13 *") == "cron \"0 0 * 13 *\": month 13 is out of range 1-12 or jan-dec" + hint);
  CHECK(parse_error("0 0 * * 8") ==
        "cron \"0 0 * * 8\": day-of-week 8 is out of range 0-7 (0 and 7 are Sunday) or sun-sat" + hint);
  CHECK(parse_error("99999999999 * * * *") ==
        "cron \"99999999999 * * * *\": minute 99999999999 is out of range 0-59" + hint);

  CHECK(parse_error("") == "cron \"\": is empty" + hint);
  CHECK(parse_error("   ") == "cron \"\": is empty" + hint);
  CHECK(parse_error("0 8 * *") ==
        "cron \"0 8 * *\": has 4 fields, needs exactly 5 (the command goes in the schedule's \"run\")" + hint);
  CHECK(parse_error("0 8 * * * node job.js") ==
        "cron \"0 8 * * * node job.js\": has 7 fields, needs exactly 5 (the command goes in the schedule's \"run\")" +
            hint);
  CHECK(parse_error("@reboot") ==
        "cron \"@reboot\": \"@reboot\" is not a known shortcut; valid: @hourly @daily @midnight @weekly @monthly "
        "@yearly @annually" +
            hint);

  CHECK(parse_error("x * * * *") == "cron \"x * * * *\": minute \"x\" is not a number (valid: 0-59)" + hint);
  CHECK(parse_error("jan * * * *") == "cron \"jan * * * *\": minute \"jan\" is not a number (valid: 0-59)" + hint);
  CHECK(parse_error("0 0 * foo *") ==
        "cron \"0 0 * foo *\": month \"foo\" is not a number or a name (valid: 1-12 or jan-dec)" + hint);
  CHECK(parse_error("0 0 * * monday") ==
        "cron \"0 0 * * monday\": day-of-week \"monday\" is not a number or a name (valid: 0-7 (0 and 7 are "
        "Sunday) or sun-sat)" +
            hint);
  CHECK(parse_error("-5 * * * *") ==
        "cron \"-5 * * * *\": minute has an empty value where a number belongs (valid: 0-59)" + hint);
  CHECK(parse_error("0 0 * * mon-") ==
        "cron \"0 0 * * mon-\": day-of-week has an empty value where a number belongs (valid: 0-7 (0 and 7 are "
        "Sunday) or sun-sat)" +
            hint);

  CHECK(parse_error("0 22-2 * * *") ==
        "cron \"0 22-2 * * *\": hour range \"22-2\" is backwards; write the smaller number first, or two ranges "
        "such as 22-23,0-2 (valid: 0-23)" +
            hint);
  CHECK(parse_error("*/0 * * * *") ==
        "cron \"*/0 * * * *\": minute step \"0\" must be a whole number of 1 or more, as in */15" + hint);
  CHECK(parse_error("*/x * * * *") ==
        "cron \"*/x * * * *\": minute step \"x\" must be a whole number of 1 or more, as in */15" + hint);
  CHECK(parse_error("*/ * * * *") ==
        "cron \"*/ * * * *\": minute step \"\" must be a whole number of 1 or more, as in */15" + hint);
  CHECK(parse_error("5/10 * * * *") ==
        "cron \"5/10 * * * *\": minute \"5/10\": a step needs * or a range before it, as in */10 or 5-59/10" + hint);
  CHECK(parse_error("1,,2 * * * *") ==
        "cron \"1,,2 * * * *\": minute \"1,,2\" has an empty entry in its list (valid: 0-59, joined by commas)" + hint);
  CHECK(parse_error("0 0 1, * *") ==
        "cron \"0 0 1, * *\": day-of-month \"1,\" has an empty entry in its list (valid: 1-31, joined by commas)" +
            hint);
}

TEST_CASE("next_fire: common expressions in UTC") {
  Zone z("UTC");
  CHECK(next("0 8 * * *", "2026-05-04 07:00 +0000") == "2026-05-04 08:00 +0000");
  CHECK(next("0 8 * * *", "2026-05-04 08:00 +0000") == "2026-05-05 08:00 +0000");  // strictly after
  CHECK(next("0 8 * * *", "2026-05-04 07:59 +0000") == "2026-05-04 08:00 +0000");
  CHECK(show(next_fire(spec("0 8 * * *"), at("2026-05-04 07:59 +0000") + 59)) == "2026-05-04 08:00 +0000");
  CHECK(show(next_fire(spec("* * * * *"), at("2026-05-04 07:59 +0000") + 1)) == "2026-05-04 08:00 +0000");
  CHECK(next("*/15 * * * *", "2026-05-04 07:50 +0000") == "2026-05-04 08:00 +0000");
  CHECK(next("*/15 * * * *", "2026-12-31 23:59 +0000") == "2027-01-01 00:00 +0000");
  CHECK(next("@hourly", "2026-05-04 07:00 +0000") == "2026-05-04 08:00 +0000");
  // 2026-05-08 is a Friday: weekdays skip the weekend.
  CHECK(fires("0 9 * * mon-fri", "2026-05-08 08:00 +0000", "2026-05-12 10:00 +0000") ==
        std::vector<std::string>{"2026-05-08 09:00 +0000", "2026-05-11 09:00 +0000", "2026-05-12 09:00 +0000"});
  CHECK(next("@weekly", "2026-05-04 00:00 +0000") == "2026-05-10 00:00 +0000");  // Sunday
  CHECK(next("0 0 * * 7", "2026-05-04 00:00 +0000") == "2026-05-10 00:00 +0000");
  CHECK(next("@monthly", "2026-05-04 00:00 +0000") == "2026-06-01 00:00 +0000");
  CHECK(next("@yearly", "2026-05-04 00:00 +0000") == "2027-01-01 00:00 +0000");
  CHECK(next("0 0 31 * *", "2026-04-01 00:00 +0000") == "2026-05-31 00:00 +0000");  // April has 30 days
  CHECK(next("30 4 1,15 * *", "2026-05-01 04:30 +0000") == "2026-05-15 04:30 +0000");
  CHECK(next("59 23 31 12 *", "2026-01-01 00:00 +0000") == "2026-12-31 23:59 +0000");
}

TEST_CASE("next_fire: February 29 and specs that never fire") {
  Zone z("UTC");
  CHECK(next("0 0 29 2 *", "2026-01-01 00:00 +0000") == "2028-02-29 00:00 +0000");
  CHECK(next("0 0 29 2 *", "2028-02-29 00:00 +0000") == "2032-02-29 00:00 +0000");
  // 2100 is no leap year, and 2104 is more than 5 years away.
  CHECK(next("0 0 29 2 *", "2096-03-01 00:00 +0000") == "never");
  CHECK(latest("0 0 29 2 *", "2020-01-01 00:00 +0000", "2027-06-01 00:00 +0000") == "2024-02-29 00:00 +0000");

  CHECK(next("0 0 30 2 *", "2026-01-01 00:00 +0000") == "never");
  CHECK(next("0 0 31 4,6,9,11 *", "2026-01-01 00:00 +0000") == "never");
  CHECK(latest("0 0 30 2 *", "1990-01-01 00:00 +0000", "2026-06-01 00:00 +0000") == "never");
}

TEST_CASE("next_fire: day-of-month and day-of-week, Vixie's OR rule") {
  Zone z("UTC");
  // February 2026: the 13th is a Friday, Mondays are the 2nd, 9th, 16th and 23rd.
  CHECK(fires("0 0 13 * 1", "2026-02-10 00:00 +0000", "2026-02-24 00:00 +0000") ==
        std::vector<std::string>{"2026-02-13 00:00 +0000", "2026-02-16 00:00 +0000", "2026-02-23 00:00 +0000"});
  CHECK(fires("0 0 13 * *", "2026-02-10 00:00 +0000", "2026-03-31 00:00 +0000") ==
        std::vector<std::string>{"2026-02-13 00:00 +0000", "2026-03-13 00:00 +0000"});
  CHECK(fires("0 0 * * 1", "2026-02-10 00:00 +0000", "2026-02-24 00:00 +0000") ==
        std::vector<std::string>{"2026-02-16 00:00 +0000", "2026-02-23 00:00 +0000"});
  // "*/2" starts with '*', so it is unrestricted for the rule: odd days that are Mondays.
  CHECK(fires("0 0 */2 * 1", "2026-02-01 00:00 +0000", "2026-02-28 00:00 +0000") ==
        std::vector<std::string>{"2026-02-09 00:00 +0000", "2026-02-23 00:00 +0000"});
  // "1-31/2" is restricted: odd days or Mondays.
  CHECK(fires("0 0 1-31/2 * 1", "2026-02-01 00:00 +0000", "2026-02-06 00:00 +0000") ==
        std::vector<std::string>{"2026-02-02 00:00 +0000", "2026-02-03 00:00 +0000", "2026-02-05 00:00 +0000"});
  // With a never-matching day of month, the day of week still fires.
  CHECK(next("0 0 30 2 1", "2026-02-10 00:00 +0000") == "2026-02-16 00:00 +0000");
}

TEST_CASE("latest_fire_between: no, one and many missed fires") {
  Zone z("UTC");
  CHECK(latest("0 8 * * *", "2026-05-04 08:00 +0000", "2026-05-05 07:59 +0000") == "never");
  CHECK(latest("0 8 * * *", "2026-05-04 08:00 +0000", "2026-05-05 08:00 +0000") == "2026-05-05 08:00 +0000");
  CHECK(latest("0 8 * * *", "2026-05-04 07:59 +0000", "2026-05-04 09:00 +0000") == "2026-05-04 08:00 +0000");
  CHECK(latest("0 8 * * *", "2026-04-01 00:00 +0000", "2026-05-05 07:00 +0000") == "2026-05-04 08:00 +0000");
  CHECK(latest("* * * * *", "2020-01-01 00:00 +0000", "2026-05-05 07:00 +0000") == "2026-05-05 07:00 +0000");
  CHECK(show(latest_fire_between(spec("* * * * *"), at("2020-01-01 00:00 +0000"), at("2026-05-05 07:00 +0000") + 59)) ==
        "2026-05-05 07:00 +0000");
  CHECK(latest("0 9 * * mon-fri", "2026-05-01 10:00 +0000", "2026-05-10 12:00 +0000") == "2026-05-08 09:00 +0000");
  CHECK(latest("0 0 1 1 *", "2020-06-01 00:00 +0000", "2026-05-05 07:00 +0000") == "2026-01-01 00:00 +0000");
  // An empty or reversed window.
  CHECK(latest("* * * * *", "2026-05-05 07:00 +0000", "2026-05-05 07:00 +0000") == "never");
  CHECK(latest("* * * * *", "2026-05-05 08:00 +0000", "2026-05-05 07:00 +0000") == "never");
}

// Europe/Berlin 2026: clocks go from 02:00 +0100 to 03:00 +0200 on March 29, and from 03:00 +0200
// back to 02:00 +0100 on October 25.
TEST_CASE("next_fire: a spring-forward gap in Europe/Berlin" * doctest::skip(no_berlin())) {
  Zone z("Europe/Berlin");
  // A fixed-time spec in the gap fires once, at the first minute after it.
  CHECK(fires("30 2 * * *", "2026-03-28 00:00 +0100", "2026-03-31 00:00 +0200") ==
        std::vector<std::string>{"2026-03-28 02:30 +0100", "2026-03-29 03:00 +0200", "2026-03-30 02:30 +0200"});
  CHECK(fires("0,30 2 * * *", "2026-03-29 00:00 +0100", "2026-03-30 12:00 +0200") ==
        std::vector<std::string>{"2026-03-29 03:00 +0200", "2026-03-30 02:00 +0200", "2026-03-30 02:30 +0200"});
  CHECK(fires("0-59 2 * * *", "2026-03-29 00:00 +0100", "2026-03-29 12:00 +0200") ==
        std::vector<std::string>{"2026-03-29 03:00 +0200"});
  // Its own 03:00 and the gap's catch-up are one fire.
  CHECK(fires("30 2,3 * * *", "2026-03-29 00:00 +0100", "2026-03-29 12:00 +0200") ==
        std::vector<std::string>{"2026-03-29 03:00 +0200", "2026-03-29 03:30 +0200"});
  CHECK(next("0 3 * * *", "2026-03-29 00:00 +0100") == "2026-03-29 03:00 +0200");
  // A wildcard spec skips the missing times.
  CHECK(fires("30 * * * *", "2026-03-29 01:00 +0100", "2026-03-29 04:00 +0200") ==
        std::vector<std::string>{"2026-03-29 01:30 +0100", "2026-03-29 03:30 +0200"});
  CHECK(fires("*/20 * * * *", "2026-03-29 01:10 +0100", "2026-03-29 03:30 +0200") ==
        std::vector<std::string>{"2026-03-29 01:20 +0100", "2026-03-29 01:40 +0100", "2026-03-29 03:00 +0200",
                                 "2026-03-29 03:20 +0200"});
  CHECK(fires("* * * * *", "2026-03-29 01:00 +0100", "2026-03-29 03:00 +0200").size() == 60);
  // Catch-up over the gap finds the same fire.
  CHECK(latest("30 2 * * *", "2026-03-29 01:00 +0100", "2026-03-29 03:10 +0200") == "2026-03-29 03:00 +0200");
  CHECK(latest("30 * * * *", "2026-03-29 01:40 +0100", "2026-03-29 03:10 +0200") == "never");
}

TEST_CASE("next_fire: a fall-back overlap in Europe/Berlin" * doctest::skip(no_berlin())) {
  Zone z("Europe/Berlin");
  // A fixed-time spec fires at the first 02:30 only.
  CHECK(fires("30 2 * * *", "2026-10-25 00:00 +0200", "2026-10-26 12:00 +0100") ==
        std::vector<std::string>{"2026-10-25 02:30 +0200", "2026-10-26 02:30 +0100"});
  CHECK(next("30 2 * * *", "2026-10-25 02:10 +0100") == "2026-10-26 02:30 +0100");
  CHECK(fires("0-59 2 * * *", "2026-10-25 00:00 +0200", "2026-10-25 12:00 +0100").size() == 60);
  CHECK(next("0-59 2 * * *", "2026-10-25 02:59 +0200") == "2026-10-26 02:00 +0100");
  // A wildcard spec fires in both passes, so it keeps its real-time rhythm.
  CHECK(fires("30 * * * *", "2026-10-25 01:00 +0200", "2026-10-25 04:00 +0100") ==
        std::vector<std::string>{"2026-10-25 01:30 +0200", "2026-10-25 02:30 +0200", "2026-10-25 02:30 +0100",
                                 "2026-10-25 03:30 +0100"});
  CHECK(next("*/15 * * * *", "2026-10-25 02:50 +0200") == "2026-10-25 02:00 +0100");
  CHECK(fires("* * * * *", "2026-10-25 02:00 +0200", "2026-10-25 03:00 +0100").size() == 120);
  // Catch-up inside the repeated hour.
  CHECK(latest("30 2 * * *", "2026-10-25 02:00 +0200", "2026-10-25 02:45 +0100") == "2026-10-25 02:30 +0200");
  CHECK(latest("30 * * * *", "2026-10-25 02:00 +0200", "2026-10-25 02:45 +0100") == "2026-10-25 02:30 +0100");
  CHECK(latest("45 2 * * *", "2026-10-25 02:50 +0200", "2026-10-25 02:50 +0100") == "never");
  CHECK(latest("0 8 * * *", "2026-10-20 00:00 +0200", "2026-10-26 09:00 +0100") == "2026-10-26 08:00 +0100");
}

TEST_CASE("next_fire matches a model of cronie's loop around Berlin's changes" * doctest::skip(no_berlin())) {
  Zone z("Europe/Berlin");
  agrees_with_cronie({"30 2 * * *", "0,30 2 * * *", "0-59 2 * * *", "30 * * * *", "*/7 * * * *", "0 */1 * * *",
                      "15 1-3 * * *", "59 1 * * *", "0 3 * * *", "5 2 * * 0", "5 2 25,29 * 3", "* * * * *"},
                     {"2026-03-28 20:00 +0100", "2026-10-24 20:00 +0200"});
}

TEST_CASE("next_fire and latest_fire_between agree around Berlin's changes" * doctest::skip(no_berlin())) {
  Zone z("Europe/Berlin");
  for (const char* text : {"30 2 * * *", "*/7 * * * *", "0-59/13 1-3 * * *", "15 */1 * * *", "0 0 * * *"}) {
    for (const char* day : {"2026-03-28 20:00 +0100", "2026-10-24 20:00 +0200"}) {
      CronSpec s = spec(text);
      std::int64_t since = at(day);
      // Each window end, stepping 23 minutes over 10 hours, must see the last fire of the chain.
      std::vector<std::int64_t> all = chain(s, since, since + 10 * 3600);
      for (std::int64_t now = since; now <= since + 10 * 3600; now += 23 * 60) {
        std::optional<std::int64_t> expected;
        for (std::int64_t c : all)
          if (c <= now) expected = c;
        const std::string where = std::string(text) + " since " + day + " now " + show(now);
        INFO(where);
        CHECK(show(latest_fire_between(s, since, now)) == show(expected));
      }
    }
  }
}

TEST_CASE("next_fire: America/New_York across both changes" * doctest::skip(no_new_york())) {
  Zone z("America/New_York");
  // 2026: 02:00 -0500 becomes 03:00 -0400 on March 8; 02:00 -0400 becomes 01:00 -0500 on November 1.
  CHECK(next("0 8 * * *", "2026-03-07 09:00 -0500") == "2026-03-08 08:00 -0400");
  CHECK(next("30 2 * * *", "2026-03-08 00:00 -0500") == "2026-03-08 03:00 -0400");
  CHECK(fires("30 1 * * *", "2026-11-01 00:00 -0400", "2026-11-02 12:00 -0500") ==
        std::vector<std::string>{"2026-11-01 01:30 -0400", "2026-11-02 01:30 -0500"});
  CHECK(next("0 8 * * *", "2026-11-01 00:00 -0400") == "2026-11-01 08:00 -0500");
  agrees_with_cronie({"30 2 * * *", "30 1 * * *", "*/20 * * * *", "0-59/9 1-2 * * *"},
                     {"2026-03-07 20:00 -0500", "2026-10-31 20:00 -0400"});
}
