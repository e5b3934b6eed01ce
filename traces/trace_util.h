// Helpers the trace store's files share and tests reach: time stamps, ids, the identity of the
// process that owns a running record, and the list cursor. Internal to traces/.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kiln::traces::detail {

// Milliseconds since the epoch of an ISO 8601 time: a date, optionally "T" + hh:mm[:ss[.fff]] and
// "Z" or an offset ("+02:00"); a missing zone is UTC.
std::optional<int64_t> parse_iso8601_ms(std::string_view s);
std::string format_iso8601_ms(int64_t ms);

std::string random_trace_id();
// Ids become path components, so nothing but the exact shape the store gives out is accepted.
bool valid_trace_id(std::string_view id);

// What tells a live process from a dead one whose pid was reused or whose machine rebooted.
struct ProcessIdentity {
  int64_t pid = 0;
  int64_t start_time = 0;  // /proc/<pid>/stat field 22, clock ticks since boot
  std::string boot_id;     // /proc/sys/kernel/random/boot_id
  std::string pid_ns;      // /proc/<pid>/ns/pid link text; pids of another namespace mean nothing here
};
const ProcessIdentity& self_identity();
// nullopt when the pid does not exist or is a zombie (it will never finish its records).
std::optional<int64_t> process_start_time(int64_t pid);
bool owner_gone(const ProcessIdentity& owner);

struct Cursor {
  std::string started_at;
  std::string id;
  uint32_t filter_hash = 0;
};
std::string encode_cursor(const Cursor& c);
std::optional<Cursor> decode_cursor(std::string_view s);
uint32_t fnv1a(std::string_view s, uint32_t h = 2166136261u);

}  // namespace kiln::traces::detail
