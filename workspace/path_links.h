// Resolving a workspace path like realpath(3), but refusing a symbolic link owned by someone else
// on the way: that user could point it anywhere, and a Kiln run as root would then sandbox (and
// mount read-write) whatever they chose. The kernel's protected_symlinks does this in sticky
// folders only. The check and the resolution are one walk, so no link is followed unchecked.
#pragma once

#include <string>

#include "core/error.h"

namespace kiln::workspace {

// The absolute path without links, `.` or `..` (components that do not exist yet are kept as
// given). Links owned by the caller's uid or by root are followed; others are an error naming them.
Result<std::string> resolve_workspace_path(const std::string& path);

}  // namespace kiln::workspace
