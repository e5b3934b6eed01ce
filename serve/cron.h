// The cron expressions of app schedules (kiln.json app.schedules[].cron): parsing, and when a spec
// fires next or last fired, in the local time zone. Pure functions; the app supervisor owns the clock.
#pragma once

#include <bitset>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/error.h"

namespace kiln::server {

// Five fields "minute hour day-of-month month day-of-week", each a comma list of `*`, N, N-M, `*`/S or
// N-M/S (S >= 1); month and day-of-week also take names (jan-dec, sun-sat, any case), day-of-week 7
// is Sunday like 0, and a day-of-week range ending in Sunday may say so with 0 ("fri-sun", "5-0").
// Shortcuts: @hourly "0 * * * *", @daily and @midnight "0 0 * * *", @weekly "0 0 * * 0", @monthly
// "0 0 1 * *", @yearly and @annually "0 0 1 1 *". As in Vixie cron and cronie, "N/S" (a step after
// a single number) and reversed ranges other than "x-0" in day-of-week are errors.
struct CronSpec {
  std::bitset<60> minutes;
  std::bitset<24> hours;
  std::bitset<32> days_of_month;  // bits 1-31
  std::bitset<13> months;         // bits 1-12
  std::bitset<7> days_of_week;    // bit 0 = Sunday
  // Vixie's day rule: when both day fields are restricted, a day matching either fires; when one
  // is unrestricted, only the other counts. As in Vixie cron and cronie, a field is unrestricted
  // when it starts with `*`, so "*/2" counts as unrestricted here: "0 0 */2 * 1" fires on odd days
  // that are Mondays, not on every odd day and every Monday.
  bool dom_star = false;
  bool dow_star = false;
  // Vixie's "wildcard job": the minute or the hour field starts with `*` (and @hourly). It decides
  // what a daylight-saving change does, see next_fire.
  bool wildcard = false;
  std::string text;  // as given, without surrounding blanks
};

// Errors are Errc::invalid_argument with a message naming the field and what it takes, e.g.
//   cron "61 * * * *": minute 61 is out of range 0-59 (fields: minute hour day-of-month month
//   day-of-week, e.g. "0 8 * * *" for 08:00 every day)
Result<CronSpec> parse_cron(std::string_view text);

// The first whole minute strictly after `after` (unix seconds) at which `spec` fires, in the local
// time zone (the process's TZ, else /etc/localtime; tzset() is called on each call so a changed TZ
// is seen), or nullopt when it does not fire within 5 years ("0 0 30 2 *"; also "0 0 29 2 *" asked
// between 2096-03 and 2099, since 2100 is no leap year).
//
// Daylight saving follows cronie (src/cron.c, its "DST begins" and "DST ends" cases), which splits
// specs into fixed-time ones (minute and hour both start with something other than `*`) and
// wildcard ones (CronSpec::wildcard):
// - A local time that does not exist (spring forward, e.g. 02:30 on the last Sunday of March in
//   Europe/Berlin): a fixed-time spec fires once at the first minute after the gap (03:00) however
//   many of its times fall in the gap ("0,30 2 * * *" fires once, at 03:00); a wildcard spec skips the
//   missing times ("30 * * * *" fires at 01:30 and 03:30 that night).
// - A local time that happens twice (fall back, 02:00-02:59 on the last Sunday of October in Berlin):
//   a fixed-time spec fires once, at the first occurrence; a wildcard spec fires at both, so
//   "*/15 * * * *" keeps firing every 15 real minutes through the repeated hour.
// Changes are assumed to move the clock by at most 3 hours, as cronie assumes too.
std::optional<std::int64_t> next_fire(const CronSpec& spec, std::int64_t after);

// Catch-up after downtime: the latest fire time t with since < t <= now, if any, under the same
// rules as next_fire (a schedule missed while kiln serve was down runs once, for the latest time it
// missed). nullopt when now <= since.
std::optional<std::int64_t> latest_fire_between(const CronSpec& spec, std::int64_t since, std::int64_t now);

}  // namespace kiln::server
