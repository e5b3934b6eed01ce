// file_list's engine: a sorted, paged listing beneath the workspace root that hides what
// .gitignore hides unless asked, so an agent sees the project and not its build output.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include "core/error.h"
#include "workspace/root.h"
#include "workspace/tree_walk.h"

namespace kiln::workspace {

struct ListRequest {
  std::string path = ".";  // folder (or single file) to list, as the client wrote it
  int depth = 1;           // 1 = immediate children; 0 = everything; larger values are capped
  std::string glob;        // empty = no filter; see Glob
  bool include_ignored = false;
  size_t offset = 0;
  size_t limit = 500;
};

inline constexpr int kMaxListDepth = 64;
inline constexpr size_t kMaxListLimit = 5000;

struct ListEntry {
  std::string path;  // relative to the workspace root
  EntryType type;
  uint64_t size = 0;         // bytes for files and symlinks (the link text), 0 for folders
  std::string mtime;         // ISO 8601 UTC, e.g. "2024-05-01T12:00:00Z"
  std::string link_target;   // symlinks only: what the link says (not followed)
};

struct ListResult {
  std::string path;  // the listed path, normalised ("." for the root)
  std::vector<ListEntry> entries;
  size_t total = 0;        // entries across all pages
  bool truncated = false;  // more entries follow this page
  std::optional<size_t> next_offset;
};

Result<ListResult> list_files(const Root& root, const ListRequest& request, std::stop_token stop = {});

// "YYYY-MM-DDTHH:MM:SSZ" for a time since the epoch, in UTC.
std::string iso8601_utc(int64_t seconds);

}  // namespace kiln::workspace
