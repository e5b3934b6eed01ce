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

// The most files, folders and links one checkpoint holds. Kiln keeps a workspace's last scan in
// memory (about 1 KB an entry) to make the next checkpoint incremental, and a command in a sandbox
// can make a million empty files without touching its disk limit; past this a checkpoint is
// refused, naming the fix (ignore the generated folders). Five times the 100,000-file tree the
// benchmarks use.
inline constexpr std::size_t kMaxCheckpointEntries = 500'000;

// The refusal when a workspace holds more than `cap` entries.
Error too_many_entries(std::size_t cap = kMaxCheckpointEntries);

class WorkspaceWatch;

// Everything beneath `start` ("" the root) down to `max_depth` (0: all). With `watch`, every
// folder met is watched before it is read (and the root first, when start is ""). More than
// `max_entries` entries: too_many_entries(), found without reading the rest.
Result<ScanResult> scan_workspace(const Root& root, std::stop_token stop, WorkspaceWatch* watch = nullptr,
                                  const std::string& start = {}, int max_depth = 0,
                                  std::size_t max_entries = kMaxCheckpointEntries);

std::int64_t now_ns();
inline std::int64_t timespec_ns(const struct timespec& t) { return std::int64_t(t.tv_sec) * 1'000'000'000 + t.tv_nsec; }

}  // namespace kiln::workspace
