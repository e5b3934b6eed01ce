// The bearer token `kiln serve --mcp` takes when no --token-file is given (Jupyter style): made
// on first use, kept 0600 in the state directory, the same on every later start, so the server's
// own user and its tools find it there and nobody else can (case 32 of SANDBOX_CASES.md).
#pragma once

#include <string>

#include "core/error.h"

namespace kiln::server {

// <state_dir>/mcp-token
std::string default_token_path(const std::string& state_dir);

// The default token: read from <state_dir>/mcp-token, or made now (32 random bytes, hex) and
// written there 0600 if the file does not exist. A file that is not ours, not a regular file or
// open to other users is refused: whoever could read or swap it could act as us.
Result<std::string> ensure_default_token(const std::string& state_dir);

}  // namespace kiln::server
