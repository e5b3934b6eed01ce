// The state directory holds traces, secrets, password hashes and the MCP bearer token: whoever
// can write it can act as the user who runs Kiln. One check, run before anything is read from it.
#pragma once

#include <string>

#include "core/error.h"

namespace kiln::workspace {

// Creates `dir` (and its parents) if missing (unless `create` is false: a command that only reads
// leaves a missing directory missing), then insists it is a directory owned by the
// effective user: one owned by someone else is refused (they could swap any file in it), and a
// mode that lets others in is narrowed to 0700 when the folder is empty or already holds Kiln's
// state; a folder open to others that holds anything else (`--state-dir /etc`) is refused and
// left as it is. Returns the directory's real path.
Result<std::string> secure_state_dir(const std::string& dir, bool create = true);

}  // namespace kiln::workspace
