// `kiln serve`: the long-lived HTTP side that serves published artifacts (and, later, MCP over
// HTTP). In the foreground for people; with --daemon it is what ensure_serve_running starts.
#pragma once

#include <string>

namespace kiln::server {

struct ServeOptions {
  std::string listen = "127.0.0.1:7700";
  bool daemon = false;
  std::string token_file;  // bearer tokens for the coming /mcp endpoint; noted, unused so far
  std::string log_level = "info";
};

// Runs until SIGTERM/SIGINT (or, as a daemon, until its state directory disappears or another
// server takes it over). Exit codes: 0 after a clean stop, 1 if it cannot start.
int serve_command(const ServeOptions& options, const std::string& state_dir);

}  // namespace kiln::server
