// `kiln traces list|show|output|export`: the trace store read straight from the state directory,
// so a person (or a CI job) can look at what ran without an MCP client or a running server.
#pragma once

#include <cstdint>
#include <string>

namespace CLI {
class App;
}

namespace kiln::server {

// Declares the subcommands on `app` (before parsing; the options live in this object, so it must
// outlive the parse) and runs the one given (after parsing). `state_dir` is main's variable: each
// subcommand also accepts --state-dir into it, as the other subcommands do.
// Exit codes: 0 ok, 1 not found or failed (message on stderr), 2 usage.
class TracesCommand {
 public:
  TracesCommand(CLI::App& app, std::string& state_dir);
  TracesCommand(const TracesCommand&) = delete;
  TracesCommand& operator=(const TracesCommand&) = delete;

  bool parsed() const;
  int run(const std::string& state_dir);

 private:
  int list(const std::string& state_dir);
  int show(const std::string& state_dir);
  int output(const std::string& state_dir);
  int export_otlp(const std::string& state_dir);

  CLI::App* traces_ = nullptr;
  CLI::App* list_ = nullptr;
  CLI::App* show_ = nullptr;
  CLI::App* output_ = nullptr;
  CLI::App* export_ = nullptr;

  std::string id_;
  bool json_ = false;
  std::string workspace_, kind_, status_;
  int64_t limit_ = 20;
  std::string stream_ = "stdout";
  std::string grep_;
  bool otlp_ = false;
  std::string output_file_;
};

}  // namespace kiln::server
