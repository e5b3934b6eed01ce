// `kiln mcp`: the MCP server on stdin/stdout, what agents and editors start.
#pragma once

#include <string>

#include "cli/command.h"
#include "sandbox/host_budget.h"
#include "mcp/stdio_transport.h"

namespace kiln::cli {

struct McpOptions {
  std::string workspace;  // opened when the client offers no roots
  server::StdioOptions stdio;
  bool allow_unsandboxed = false;
  int sandbox_idle_s = 1800;
  sandbox::HostCeilings ceilings;
};

class McpCommand final : public Command {
 public:
  std::string_view name() const override { return "mcp"; }
  CLI::App& configure(CLI::App& app) override;
  int run(const GlobalOptions& global) override;
  const McpOptions& options() const { return options_; }

 private:
  McpOptions options_;
};

}  // namespace kiln::cli
