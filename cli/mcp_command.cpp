// `kiln mcp`: composes the MCP runtime (cli/mcp_runtime.h) and serves one client on stdio until
// it hangs up or a termination signal arrives.
#include "cli/mcp_command.h"

#include <CLI/CLI.hpp>

#include "cli/ceiling_options.h"
#include "cli/mcp_runtime.h"

namespace kiln::cli {

CLI::App& McpCommand::configure(CLI::App& app) {
  auto* mcp = app.add_subcommand("mcp", "Serve the Model Context Protocol on stdin/stdout");
  mcp->footer(
      "Agents and editors start `kiln mcp` and speak MCP (JSON-RPC) on its stdin and stdout; logs go to "
      "stderr. Exit: 0 once the client closes stdin or a SIGTERM, SIGINT or SIGHUP arrives, 1 if it cannot start.");
  mcp->add_option("--workspace", options_.workspace, "Folder to open when the client offers no roots");
  mcp->add_option("--max-message-bytes", options_.stdio.max_message_bytes, "Largest accepted message (default 16 MiB)")
      ->check(CLI::Range(std::size_t(1024), std::size_t(1) << 30));
  mcp->add_flag("--allow-unsandboxed", options_.allow_unsandboxed,
                "Permit sandbox isolation \"none\" (commands run directly on the host; every result says so)");
  mcp->add_option("--sandbox-idle-s", options_.sandbox_idle_s, "Destroy session sandboxes idle this long (default 1800)")
      ->check(CLI::Range(1, 7 * 24 * 3600));
  add_ceiling_options(*mcp, options_.ceilings);
  return *mcp;
}

int McpCommand::run(const GlobalOptions& global) {
  server::block_termination_signals();  // before the first thread, see stdio_transport.h
  // The stores open once the first message, `initialize`, is answered; every other message waits
  // for them, and a failure to open them still ends the process with 1 and the reason on stderr.
  auto runtime = prepare_mcp_runtime(
      {global.state_dir, options_.workspace, options_.allow_unsandboxed, options_.sandbox_idle_s, options_.ceilings});
  return server::run_stdio(runtime.context, options_.stdio, std::move(runtime.open));
}

}  // namespace kiln::cli
