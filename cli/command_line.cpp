// Registration order is the order `kiln --help` lists the subcommands in.
#include "cli/command_line.h"

#include <cstdio>
#include <string_view>

#include "cli/artifacts_command.h"
#include "cli/checkpoint_command.h"
#include "cli/global_options.h"
#include "cli/mcp_command.h"
#include "cli/publish_command.h"
#include "cli/run_command.h"
#include "cli/secret_command.h"
#include "cli/serve_command.h"
#include "cli/traces_command.h"
#include "cli/verify_command.h"
#include "cli/workspace_command.h"
#include "mcp/logging.h"
#include "workspace/state_dir.h"
#include "workspace/state_store.h"

namespace kiln::cli {

bool state_store_opens(const std::string& state_dir) {
  auto store = workspace::StateStore::open(state_dir);
  if (!store) std::fprintf(stderr, "kiln: %s\n", store.error().message.c_str());
  return bool(store);
}

CommandLine::CommandLine()
    : app_("Kiln: workspaces, sandboxed runs, traces and publishing for coding agents, over MCP") {
  app_.set_version_flag("--version", std::string("kiln ") + KILN_VERSION);
  app_.require_subcommand(1);
  all_.push_back(std::make_unique<McpCommand>());
  all_.push_back(std::make_unique<RunCommand>());
  all_.push_back(std::make_unique<VerifyCommand>());
  all_.push_back(std::make_unique<SecretCommand>());
  all_.push_back(std::make_unique<ServeCommand>());
  all_.push_back(std::make_unique<TracesCommand>());
  all_.push_back(std::make_unique<PublishCommand>());
  all_.push_back(std::make_unique<ArtifactsCommand>());
  all_.push_back(std::make_unique<CheckpointCommand>());
  all_.push_back(std::make_unique<WorkspaceCommand>());
}

namespace {

// The subcommand argv names when nothing but the shared options (cli/global_options.h) and their
// values come before it; nullptr when anything else does (--help, --version, a typo), which the
// parser with every subcommand declared then answers.
Command* plainly_named(const std::vector<std::unique_ptr<Command>>& all, int argc, const char* const* argv) {
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "--state-dir" || a == "--log-level") {
      ++i;
      continue;
    }
    if (a.starts_with("--state-dir=") || a.starts_with("--log-level=")) continue;
    for (const auto& c : all)
      if (c->name() == a) return c.get();
    return nullptr;
  }
  return nullptr;
}

}  // namespace

void CommandLine::declare(int argc, const char* const* argv) {
  if (declared_) return;
  declared_ = true;
  Command* only = plainly_named(all_, argc, argv);
  for (auto& c : all_) {
    if (only && c.get() != only) continue;
    CLI::App& sub = c->configure(app_);
    commands_.push_back({c.get(), &sub});
  }
  add_global_options(app_, global_);
}

std::optional<int> CommandLine::parse(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  selected_ = nullptr;
  declare(argc, argv);
  try {
    app_.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app_.exit(e, out, err);
  }
  for (auto& r : commands_)
    if (r.app->parsed()) selected_ = r.command;
  return std::nullopt;
}

int CommandLine::run() {
  if (!selected_) return 1;
  server::init_logging(global_.log_level);
  std::string state_dir = global_.state_dir.empty() ? workspace::default_state_dir() : global_.state_dir;
  // Every command reads or writes the state directory: refuse one another user could swap files in.
  auto safe = workspace::secure_state_dir(state_dir, selected_->creates_state_dir());
  if (!safe) {
    std::fprintf(stderr, "kiln: %s\n", safe.error().message.c_str());
    return selected_->state_dir_failure_exit();
  }
  global_.state_dir = *safe;
  return selected_->run(global_);
}

}  // namespace kiln::cli
