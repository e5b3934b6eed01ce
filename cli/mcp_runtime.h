// What every MCP transport of one process shares, wired once: state store, sandboxes, traces,
// artifacts and the tool registry. `kiln mcp` (stdio) and `kiln serve --mcp` (Streamable HTTP)
// both start from here, so no transport builds its own copy of the server.
#pragma once

#include <functional>
#include <string>

#include "core/error.h"
#include "sandbox/host_budget.h"
#include "mcp/session.h"

namespace kiln::cli {

struct McpRuntimeOptions {
  std::string state_dir;
  std::string startup_workspace;  // --workspace PATH, opened when a client offers no roots
  bool allow_unsandboxed = false;
  int sandbox_idle_s = 1800;
  sandbox::HostCeilings ceilings;  // --max-sandboxes, --max-sandbox-memory-mb, ... (0: this host's default)
};

// The runtime in two steps, for a transport that answers `initialize` before the stores open
// (kiln mcp): `context` exists at once, and a session may be made on it and answer `initialize`
// (which reads no state); open() opens the stores, marks the runs of dead servers interrupted,
// starts the sandbox manager (which clears the cgroups of dead servers) and starts filling the
// tool registry. Nothing else may reach the context's stores, tools or resources before open()
// has returned success. Call one of the two entry points once per process.
struct PendingMcpRuntime {
  server::ServerContext& context;
  std::function<Result<void>()> open;
};
PendingMcpRuntime prepare_mcp_runtime(const McpRuntimeOptions& options);

// Both steps at once: opens the stores and the sandbox manager for the rest of the process (tool
// handlers and the sandbox reaper use them until exit) and starts filling the tool registry in
// the background. The context's options are the caller's to adjust.
Result<server::ServerContext*> open_mcp_runtime(const McpRuntimeOptions& options);

}  // namespace kiln::cli
