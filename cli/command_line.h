// The `kiln` command line: the parser with every subcommand registered, the options they share,
// and the steps every command takes before its own (logging, a secured state directory).
#pragma once

#include <memory>
#include <optional>
#include <iostream>
#include <ostream>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/command.h"

namespace kiln::cli {

class CommandLine {
 public:
  CommandLine();  // registers every subcommand
  CommandLine(const CommandLine&) = delete;
  CommandLine& operator=(const CommandLine&) = delete;

  // Parses argv. nullopt: a command is ready to run(). Otherwise the process's exit code: 0 after
  // --help or --version, CLI11's code for a usage error (the message written to `out`/`err`).
  std::optional<int> parse(int argc, const char* const* argv, std::ostream& out = std::cout,
                           std::ostream& err = std::cerr);

  // The command parse() picked (nullptr before a successful parse).
  Command* selected() const { return selected_; }
  const GlobalOptions& global() const { return global_; }

  // Sets up logging, secures the state directory and runs the selected command.
  int run();

 private:
  CLI::App app_;
  GlobalOptions global_;
  struct Registered {
    std::unique_ptr<Command> command;
    CLI::App* app;
  };
  std::vector<Registered> commands_;
  Command* selected_ = nullptr;
};

}  // namespace kiln::cli
