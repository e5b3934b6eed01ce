// `kiln serve`: the long-lived HTTP side that serves published artifacts and, with --mcp, MCP's
// Streamable HTTP transport at /mcp. In the foreground for people; with --daemon it is what
// ensure_serve_running starts.
#pragma once

#include <cstddef>
#include <string>

#include "sandbox/host_budget.h"

namespace kiln::server {

struct ServeOptions {
  std::string listen = "127.0.0.1:7700";
  bool daemon = false;
  std::string token_file;  // bearer tokens for /mcp (NAME TOKEN lines); default: <state>/mcp-token
  std::string log_level = "info";
  // --mcp and what its sessions need (the same as `kiln mcp`'s options).
  bool mcp = false;
  std::string workspace;
  bool allow_unsandboxed = false;
  int sandbox_idle_s = 1800;
  int session_idle_s = 1800;
  sandbox::HostCeilings ceilings;
  std::size_t max_message_bytes = 16 * 1024 * 1024;
};

// Runs until SIGTERM/SIGINT (or, as a daemon, until its state directory disappears or another
// server takes it over). Exit codes: 0 after a clean stop, 1 if it cannot start.
int serve_command(const ServeOptions& options, const std::string& state_dir);

// `kiln serve --print-token`: prints the state directory's MCP bearer token (making it first if
// there is none yet), for pasting into a client's Authorization header.
int print_token_command(const std::string& state_dir);

}  // namespace kiln::server
