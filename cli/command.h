// One `kiln` subcommand as a class: it declares its options and help on the parser, and runs
// once parsing picked it. cli/command_line.h registers them all and owns what they share.
#pragma once

#include <string>
#include <string_view>

namespace CLI {
class App;
}

namespace kiln::cli {

// The options every subcommand takes, before or after its name (cli/global_options.h).
struct GlobalOptions {
  std::string state_dir;  // secured (made ours, 0700, its real path) before Command::run
  std::string log_level = "info";
};

class Command {
 public:
  virtual ~Command() = default;

  virtual std::string_view name() const = 0;

  // Adds the subcommand, its options and any subcommands of its own to `app` and returns it. The
  // parsed values land in this object, so it must outlive the parse. --state-dir and --log-level
  // are added by the caller to the returned app and every subcommand below it.
  virtual CLI::App& configure(CLI::App& app) = 0;

  // The exit code when the state directory cannot be used: commands that pass a child's exit
  // code through reserve theirs for kiln's own failures (`kiln run`: 125, `kiln verify`: 2).
  virtual int state_dir_failure_exit() const { return 1; }

  // False for commands that only read: a missing state directory stays missing.
  virtual bool creates_state_dir() const { return true; }

  // Runs the parsed command; returns the process's exit code.
  virtual int run(const GlobalOptions& global) = 0;
};

// Opens the state store once (which makes its files, 0700) before a command that records into it;
// false, after saying why on stderr, if it cannot.
bool state_store_opens(const std::string& state_dir);

}  // namespace kiln::cli
