// `kiln mcp`: one MCP session over stdin/stdout, newline-delimited JSON or, when the first bytes
// are a Content-Length header, LSP-style framing for the whole session.
#pragma once

#include <cstddef>

#include "mcp/session.h"

namespace kiln::server {

struct StdioOptions {
  std::size_t max_message_bytes = 16 * 1024 * 1024;
};

// Blocks SIGTERM/SIGINT/SIGHUP in the calling thread, so threads created afterwards inherit the
// mask and run_stdio's signal thread is the only one that takes them. Call it before starting any
// thread.
void block_termination_signals();

// Serves until stdin closes or SIGTERM/SIGINT/SIGHUP arrives; returns the process exit code.
int run_stdio(ServerContext& server, const StdioOptions& options);

}  // namespace kiln::server
