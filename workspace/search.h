// file_search's engine: a PCRE2 (JIT) search over the workspace, parallel on the tree walker,
// .gitignore-aware, with results that are the same on every run even when cut short.
#pragma once

#include <cstddef>
#include <functional>
#include <stop_token>
#include <string>
#include <vector>

#include "core/error.h"
#include "workspace/root.h"

namespace kiln::workspace {

struct SearchRequest {
  std::string pattern;     // a PCRE2 regex, or plain text with literal
  std::string path = ".";  // folder or single file to search, as the client wrote it
  std::string glob;        // empty = every file; see Glob
  bool literal = false;
  bool case_sensitive = true;
  int context_lines = 0;
  size_t max_results = 200;
  bool include_ignored = false;
  size_t read_chunk = 0;  // bytes read per chunk of a big file; 0 = default (tests use small ones)
};

inline constexpr int kMaxContextLines = 10;
inline constexpr size_t kMaxSearchResults = 5000;
inline constexpr size_t kMaxLineBytes = 500;  // longer lines are clipped around the match

struct SearchMatch {
  std::string path;  // relative to the workspace root
  size_t line = 0;    // 1-based
  size_t column = 0;  // 1-based, in bytes from the start of the line
  std::string text;   // the matching line (clipped, valid UTF-8, no line terminator)
  std::vector<std::string> before;  // up to context_lines lines before it, oldest first
  std::vector<std::string> after;   // up to context_lines lines after it
};

struct SearchResult {
  std::vector<SearchMatch> matches;  // sorted by (path in tree order, line); one per matching line
  size_t files_scanned = 0;          // files read (binary ones included)
  size_t files_matched = 0;
  size_t binary_files_skipped = 0;
  size_t total_matches_seen = 0;  // matching lines in all files, also beyond max_results
  bool truncated = false;         // total_matches_seen > matches.size()
};

// Called from the calling thread at most about every 100 ms while the search runs.
using SearchProgress = std::function<void(size_t files_scanned)>;

// Errc::invalid_argument for a bad regex (PCRE2's message and offset), a bad glob or limits
// out of range; Errc::cancelled once `stop` is requested; path errors as Root reports them.
Result<SearchResult> search(const Root& root, const SearchRequest& request, std::stop_token stop,
                            const SearchProgress& progress = {});

}  // namespace kiln::workspace
