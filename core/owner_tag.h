// Names that say which process made them (".o<pid>-<start time>"), so whoever finds one after a
// crash can tell whether its maker is gone: kiln's cgroups (sandbox/) and publish temp files
// (artifacts/). A pid alone is reused; a pid with its start time names one process per boot.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>

namespace kiln {

// Field 22 of /proc/<pid>/stat, the start time in clock ticks since boot; empty when the process
// is gone or a zombie (which will never touch what it named).
inline std::string process_start_time(long pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  auto close = stat.rfind(')');
  if (close == std::string::npos || close + 2 >= stat.size()) return {};
  std::istringstream in(stat.substr(close + 2));
  std::string field;
  for (int i = 3; i <= 22 && (in >> field); ++i) {
    if (i == 3 && (field == "Z" || field == "X")) return {};
    if (i == 22) return field;
  }
  return {};
}

// "o<pid>-<start time>" of this process.
inline const std::string& owner_tag() {
  static const std::string tag = "o" + std::to_string(::getpid()) + "-" + process_start_time(::getpid());
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
    return process_start_time(pid) == start;
  }
  return std::nullopt;
}

}  // namespace kiln
