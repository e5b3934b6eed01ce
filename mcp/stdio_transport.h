// `kiln mcp`: one MCP session over stdin/stdout, newline-delimited JSON or, when the first bytes
// are a Content-Length header, LSP-style framing for the whole session.
#pragma once

#include <cstddef>
#include <functional>

#include "core/error.h"

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
//
// `open_runtime`, when given, opens what `server` needs beyond answering `initialize` (its stores,
// interrupted runs, stale cgroups; cli/mcp_runtime.h), so the client's wait for that answer does
// not include it. It runs on the calling thread once the reader has answered a leading
// `initialize` (or holds another message, or input ended, or a signal came). Every message but
// that `initialize` waits until it has returned; if it fails, its error goes to stderr
// ("kiln: ...") and the process exits with 1 before any other message is handled.
int run_stdio(ServerContext& server, const StdioOptions& options,
              std::function<Result<void>()> open_runtime = {});

}  // namespace kiln::server
