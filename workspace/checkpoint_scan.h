// One pass over a workspace for a checkpoint: every entry file_list would show, with what the
// stat cache compares (inode, size, mtime and ctime in nanoseconds) and symlink targets.
#pragma once

#include <cstdint>
#include <ctime>
#include <stop_token>
#include <string>
#include <vector>

#include "core/error.h"
#include "workspace/checkpoint_tree.h"
#include "workspace/root.h"

namespace kiln::workspace {

struct ScanNode {
  TreeEntry entry;  // sha still empty
  std::uint64_t ino = 0;
  std::uint64_t nlink = 1;  // a file with other names can change without its folder hearing of it
  std::int64_t mtime_ns = 0, ctime_ns = 0;
  std::string link_target;
};

struct ScanResult {
  std::vector<ScanNode> nodes;  // tree order
  std::vector<std::string> skipped;  // "path: why", the first kMaxSkippedShown
  std::uint64_t skipped_count = 0;
};
inline constexpr std::size_t kMaxSkippedShown = 20;

class WorkspaceWatch;

// Everything beneath `start` ("" the root) down to `max_depth` (0: all). With `watch`, every
// folder met is watched before it is read (and the root first, when start is "").
Result<ScanResult> scan_workspace(const Root& root, std::stop_token stop, WorkspaceWatch* watch = nullptr,
                                  const std::string& start = {}, int max_depth = 0);

std::int64_t now_ns();
inline std::int64_t timespec_ns(const struct timespec& t) { return std::int64_t(t.tv_sec) * 1'000'000'000 + t.tv_nsec; }

}  // namespace kiln::workspace
