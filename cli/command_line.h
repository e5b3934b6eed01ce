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
  CommandLine();  // makes every subcommand; parse() registers them with the parser
  CommandLine(const CommandLine&) = delete;
  CommandLine& operator=(const CommandLine&) = delete;

  // Parses argv. nullopt: a command is ready to run(). Otherwise the process's exit code: 0 after
  // --help or --version, CLI11's code for a usage error (the message written to `out`/`err`).
  // When argv plainly names a subcommand (only --state-dir and --log-level before it), only that
  // one's options are declared (declaring all ten took about 0.4 ms of `kiln mcp`'s start-up).
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
    Command* command;
    CLI::App* app;
  };
  void declare(int argc, const char* const* argv);

  std::vector<std::unique_ptr<Command>> all_;  // in --help's order
  std::vector<Registered> commands_;           // those declared on app_
  bool declared_ = false;
  Command* selected_ = nullptr;
};

}  // namespace kiln::cli
