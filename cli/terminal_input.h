// Passwords and secret values typed at a terminal: asked for on stderr, read without echo, so they
// appear neither on the screen nor in a scrollback.
#pragma once

#include <string>

namespace kiln::cli {

// Writes `prompt` to stderr and reads one line from stdin (a terminal) with echo off; the newline
// the user ends it with is echoed, not returned.
std::string read_hidden_line(const std::string& prompt);

}  // namespace kiln::cli
