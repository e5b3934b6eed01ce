// Names that say which process made them (".o<pid>-<start time>"), so whoever finds one after a
// crash can tell whether its maker is gone: kiln's cgroups (sandbox/) and publish temp files
// (artifacts/). A pid alone is reused; a pid with its start time names one process per boot.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include "core/proc_stat.h"

namespace kiln {

// The start time as the tag spells it ("" when the process is gone or a zombie).
inline std::string start_time_text(long pid) {
  if (pid <= 0 || pid > std::numeric_limits<pid_t>::max()) return {};
  auto t = process_start_time(static_cast<pid_t>(pid));
  return t ? std::to_string(*t) : std::string();
}

// "o<pid>-<start time>" of this process.
inline const std::string& owner_tag() {
  static const std::string tag = "o" + std::to_string(::getpid()) + "-" + start_time_text(::getpid());
  return tag;
}

// For a name holding ".o<pid>-<start>" (followed by '.' or the end): whether that process still
// lives; nullopt when the name carries no such tag.
inline std::optional<bool> tagged_owner_alive(std::string_view name) {
  constexpr auto npos = std::string_view::npos;
  auto digits = [](std::string_view s) { return !s.empty() && s.find_first_not_of("0123456789") == npos; };
  for (auto at = name.find(".o"); at != npos; at = name.find(".o", at + 1)) {
    std::string_view rest = name.substr(at + 2);
    auto dash = rest.find('-');
    if (dash == npos || !digits(rest.substr(0, dash))) continue;
    std::string_view start = rest.substr(dash + 1);
    start = start.substr(0, start.find('.'));
    long pid = std::strtol(std::string(rest.substr(0, dash)).c_str(), nullptr, 10);
    if (!digits(start) || pid <= 0) continue;
    return start_time_text(pid) == start;
  }
  return std::nullopt;
}

}  // namespace kiln
