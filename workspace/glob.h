// Shell-style matching shared by the `glob` argument of file_list/file_search and by .gitignore
// rules: one wildmatch engine with git's semantics, so "**" means the same thing everywhere.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace kiln::workspace {

// git's wildmatch with WM_PATHNAME: `*`, `?` and `[...]` never match '/', `**` between slashes
// (or at either end) matches any number of folders, `\` escapes the next character.
bool wildmatch(std::string_view pattern, std::string_view text);

// A compiled `glob` argument. A pattern without '/' matches the last path component anywhere
// ("*.cpp", "test_*"); with '/' it matches the whole relative path ("src/**/*.h"). `{a,b}` expands
// to alternatives (nesting allowed). A leading "/" or "./" is ignored.
class Glob {
 public:
  static Result<Glob> compile(std::string_view pattern);

  // `rel` is a path relative to the workspace root with '/' separators.
  bool matches(std::string_view rel) const;

  const std::string& source() const { return source_; }

 private:
  struct Alternative {
    std::string pattern;
    bool whole_path;  // contains '/': match the relative path, not just the basename
  };
  std::string source_;
  std::vector<Alternative> alternatives_;
};

}  // namespace kiln::workspace
