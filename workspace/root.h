// The one place that turns a client's path into something on disk. Every file tool goes through
// Root, which holds the workspace folder open and resolves beneath it race-free (openat2 with
// RESOLVE_BENEATH, or a per-component O_NOFOLLOW walk where the kernel lacks openat2), so `..`,
// absolute paths elsewhere, symlinks pointing out and magic links like /proc/self/root are refused.
#pragma once

#include <string>
#include <string_view>
#include <sys/types.h>

#include "core/error.h"
#include "core/unique_fd.h"

namespace kiln::workspace {

class Root {
 public:
  // `path` must name an existing directory; it is canonicalised (symlinks resolved) once here.
  static Result<Root> open(const std::string& path);
  // `path` is already resolved (a stored workspace root, or resolve_workspace_path's result): it
  // is opened following no symlink at all, so a folder swapped for a link since is refused rather
  // than followed to wherever the link points.
  static Result<Root> open_resolved(const std::string& path);

  const std::string& path() const { return path_; }  // canonical absolute path, no trailing slash
  int fd() const { return dir_.get(); }               // O_PATH|O_DIRECTORY descriptor of the root

  // Normalises a client path: relative to the root, or absolute inside it. Returns the relative
  // form with no "." components and no trailing slash ("" is the root itself). Refuses NUL,
  // newline, empty strings, and anything whose lexical form leaves the root, naming the path.
  Result<std::string> relative(std::string_view client_path) const;

  // Opens a path beneath the root. `flags` are open(2) flags; symlinks inside the workspace that
  // stay inside are followed, any that lead out (or magic links) are refused with Errc::path_escape.
  Result<UniqueFd> open(std::string_view client_path, int flags, mode_t mode = 0) const;

  // For operations that create, rename or remove an entry: the containing directory, opened
  // beneath the root, plus the final component (never "", "." or ".."). With create_dirs,
  // missing parent folders are made (each one beneath the root).
  struct Parent {
    UniqueFd dir;
    std::string name;  // last component
    std::string rel;   // normalised relative path of the whole thing
  };
  Result<Parent> open_parent(std::string_view client_path, bool create_dirs = false) const;

  // The normalised relative path of what `client_path` really names once symlinks inside the
  // workspace are followed (a file tool writing "through" a link replaces the target, not the link).
  Result<std::string> resolve(std::string_view client_path) const;

  // Tests use this to exercise the per-component walk on kernels that do have openat2.
  static void force_component_walk(bool on);

  Root(Root&&) noexcept = default;
  Root& operator=(Root&&) noexcept = default;

 private:
  Root() = default;
  std::string path_;
  std::string alias_;  // the spelling the caller opened it by, when that differs from path_
  UniqueFd dir_;
};

}  // namespace kiln::workspace
