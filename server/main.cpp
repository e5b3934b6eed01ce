// The `kiln` command line: `kiln mcp` (the MCP server on stdio) and, as later layers land,
// `kiln run`, `kiln verify`, `kiln serve`, `kiln publish`.
#include <cstdio>
#include <string>

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include "server/logging.h"
#include "server/session.h"
#include "server/stdio_transport.h"
#include "server/tool_registry.h"
#include "server/tools.h"
#include "workspace/state_store.h"

namespace {

kiln::server::ToolRegistry build_registry() {
  kiln::server::ToolRegistry registry;
  kiln::server::register_workspace_tools(registry);
  kiln::server::register_file_tools(registry);
  kiln::server::register_search_tools(registry);
  registry.check_complete();
  return registry;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Kiln: workspaces, sandboxed runs, traces and publishing for coding agents, over MCP"};
  app.set_version_flag("--version", std::string("kiln ") + KILN_VERSION);
  app.require_subcommand(1);

  std::string state_dir;
  std::string log_level = "info";
  app.add_option("--state-dir", state_dir, "State directory (default $KILN_HOME, $XDG_STATE_HOME/kiln, ~/.local/state/kiln)");
  app.add_option("--log-level", log_level, "stderr log level: debug, info, warning, error")
      ->check(CLI::IsMember({"debug", "info", "notice", "warning", "error", "critical", "off"}));

  auto* mcp = app.add_subcommand("mcp", "Serve the Model Context Protocol on stdin/stdout");
  std::string workspace;
  kiln::server::StdioOptions stdio;
  mcp->add_option("--workspace", workspace, "Folder to open when the client offers no roots");
  mcp->add_option("--max-message-bytes", stdio.max_message_bytes, "Largest accepted message (default 16 MiB)")
      ->check(CLI::Range(std::size_t(1024), std::size_t(1) << 30));
  mcp->add_option("--state-dir", state_dir, "State directory");
  mcp->add_option("--log-level", log_level, "stderr log level")
      ->check(CLI::IsMember({"debug", "info", "notice", "warning", "error", "critical", "off"}));

  CLI11_PARSE(app, argc, argv);

  kiln::server::init_logging(log_level);
  if (state_dir.empty()) state_dir = kiln::workspace::default_state_dir();

  if (mcp->parsed()) {
    auto store = kiln::workspace::StateStore::open(state_dir);
    if (!store) {
      std::fprintf(stderr, "kiln: %s\n", store.error().message.c_str());
      return 1;
    }
    static kiln::server::ToolRegistry registry = build_registry();
    kiln::server::ServerContext server{**store, registry, {}};
    server.options.startup_workspace = workspace;
    return kiln::server::run_stdio(server, stdio);
  }
  return 0;
}
