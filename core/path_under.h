// Whether one absolute path lies at or beneath another, by their text alone (no file system
// access): for paths already resolved, such as the mounts a sandbox is built from.
#pragma once

#include <string_view>

namespace kiln {

// "/etc/ssl" is under "/etc" and under itself; "/etcetera" is not under "/etc"; every absolute
// path is under "/".
inline bool path_under(std::string_view path, std::string_view dir) {
  if (dir == "/") return path.starts_with('/');
  return path == dir || (path.size() > dir.size() && path.starts_with(dir) && path[dir.size()] == '/');
}

}  // namespace kiln
