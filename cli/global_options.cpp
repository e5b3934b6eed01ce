// The shared options of cli/global_options.h.
#include "cli/global_options.h"

#include <string>

#include <fmt/format.h>

#include "mcp/logging.h"

namespace kiln::cli {

CLI::Validator log_level_validator() {
  const std::string names = fmt::format("{{{}}}", fmt::join(server::log_level_names(), ","));
  return CLI::Validator(
      [names](std::string& value) -> std::string {
        return server::parse_level(value) ? std::string() : value + " not in " + names;
      },
      names);
}

void add_global_options(CLI::App& app, GlobalOptions& global) {
  app.add_option("--state-dir", global.state_dir,
                 "State directory (default $KILN_HOME, $XDG_STATE_HOME/kiln, ~/.local/state/kiln)");
  app.add_option("--log-level", global.log_level, "Least severe log lines written to stderr (kiln serve --daemon: serve.log); default info")->check(log_level_validator());
  for (CLI::App* sub : app.get_subcommands({})) add_global_options(*sub, global);
}

}  // namespace kiln::cli
