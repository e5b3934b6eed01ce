// --state-dir and --log-level, declared in one place for `kiln` and every subcommand below it, so
// `kiln --state-dir X mcp` and `kiln mcp --state-dir X` mean the same.
#pragma once

#include <CLI/CLI.hpp>

#include "cli/command.h"

namespace kiln::cli {

// Adds both options to `app` and, recursively, to each of its subcommands (all writing `global`).
void add_global_options(CLI::App& app, GlobalOptions& global);

// Accepts what the log-level parser (mcp/logging.h) accepts; help lists its level names.
CLI::Validator log_level_validator();

}  // namespace kiln::cli
