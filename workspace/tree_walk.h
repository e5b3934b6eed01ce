// The one directory walker behind file_list and file_search: parallel, confined beneath the
// workspace root (every step an openat with O_NOFOLLOW from the parent's descriptor, so no
// symlink or rename can lead it out), .gitignore-aware, and cancellable.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <stop_token>
#include <string>
#include <string_view>

#include "core/error.h"
#include "workspace/gitignore.h"
#include "workspace/root.h"

namespace kiln::workspace {

enum class EntryType { file, dir, symlink, other };

std::string_view to_string(EntryType type);  // "file", "dir", "symlink", "other"

// Lets callers compare against the wire names directly (entry.type == "dir").
inline bool operator==(EntryType type, std::string_view name) { return to_string(type) == name; }

// Tree order for relative paths: byte order, except that '/' sorts before every other byte, so
// a folder's contents follow the folder itself ("a", "a/b", "a-b" rather than "a", "a-b", "a/b").
bool path_less(std::string_view a, std::string_view b);

struct WalkEntry {
  std::string_view path;  // relative to the workspace root
  std::string_view name;  // the last component of path; NUL-terminated, so usable as a C string
  EntryType type;
  int depth;   // 1 = a child of the start folder
  int dir_fd;  // the containing folder, open only during the visit (for fstatat/openat by name)
};

// What any walk stops at, whatever the caller asked: a folder more than kMaxWalkDepth below the
// workspace root is not entered, and an entry whose path is longer than kMaxWalkPath (PATH_MAX,
// the most any tool accepts) is not visited. A command in a sandbox can nest folders as deep as
// it likes; without these, a chain of 30,000 folders cost the walk's callers memory in the square
// of the depth and recursion deeper than a thread's stack.
inline constexpr int kMaxWalkDepth = 1024;
inline constexpr std::size_t kMaxWalkPath = 4096;

struct WalkOptions {
  std::string start;  // folder to walk, relative to the root as Root::relative returns ("" = root)
  int max_depth = 0;  // 0 = unlimited; 1 = only the start folder's children
  bool include_ignored = false;
  unsigned threads = 0;  // 0 = up to the cores (at least 2), taken from the slots every walk in the process shares
  // Called on the calling thread about every tick_interval while the walk runs, so callers
  // can report progress from a thread that owns their transport.
  std::function<void()> on_tick;
  // Called by a worker with each folder's own descriptor just after opening it and before reading
  // it (checkpoints add an inotify watch there, so no change made during the walk is missed).
  std::function<void(const std::string& rel, int dir_fd)> on_folder_open;
  std::chrono::milliseconds tick_interval{100};
};

struct WalkStats {
  size_t dirs = 0;        // folders read
  size_t unreadable = 0;  // folders skipped because they could not be opened or read
  size_t too_deep = 0;    // folders not entered and entries not visited (kMaxWalkDepth, kMaxWalkPath)
  std::string first_too_deep;  // one of them, shortened to its first kMaxWalkPath bytes
};

// Called concurrently by the workers; `worker` is in [0, walk_thread_count(options)) so a visitor
// can keep per-thread buffers without locking.
using WalkVisitor = std::function<void(const WalkEntry& entry, unsigned worker)>;

unsigned walk_thread_count(const WalkOptions& options);

// Visits every entry beneath the start folder (folders too), in no particular order. Ignored
// entries (unless include_ignored) and anything named ".git" are neither visited nor entered;
// symlinks are visited as EntryType::symlink and never followed. Returns Errc::cancelled once
// `stop` is requested, not_found/path_escape when the start folder cannot be opened, and
// Errc::internal if a visitor throws.
Result<WalkStats> walk(const Root& root, const WalkOptions& options, std::stop_token stop, const WalkVisitor& visit);

// Whether the start of a list or search (`rel` as Root::relative returns it, "" = the root) is a
// folder, resolved beneath the root like every other open; `shown` names it in errors.
Result<bool> is_folder_beneath(const Root& root, std::string_view rel, std::string_view shown);

// The ignore rules in force for entries of folder `rel`: the files of the root and of every
// folder down to `rel` itself, as the walker would have stacked them on its way there.
IgnoreChain::Ptr load_ignore_chain(const Root& root, std::string_view rel);

// Reads the ignore files of one folder onto `parent` (.git/info/exclude too when rel is "").
IgnoreChain::Ptr extend_ignore_chain(IgnoreChain::Ptr parent, int dir_fd, const std::string& rel);

}  // namespace kiln::workspace
