// `kiln run [OPTIONS] -- CMD...`: one command in the same sandbox agents get, for people and CI:
// live output, the command's exit code passed through, a trace like an agent's run.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cli/command.h"

namespace kiln::cli {

struct RunOptions {
  std::string workspace, network, isolation;
  double timeout_s = 0, cpu_s = 0;
  std::uint64_t memory_mb = 0, pids = 0, output_bytes = 0, file_size_mb = 0, disk_mb = 0;
  std::vector<std::string> env, secrets, command;
  bool allow_unsandboxed = false, verbose = false;
};

// Exit codes: the command's own; 124 timed out, 125 kiln could not start it, 130 interrupted,
// 128+N killed by signal N.
int run_in_sandbox(const RunOptions& options, const std::string& state_dir);

class RunCommand final : public Command {
 public:
  std::string_view name() const override { return "run"; }
  CLI::App& configure(CLI::App& app) override;
  int state_dir_failure_exit() const override { return 125; }
  int run(const GlobalOptions& global) override;
  const RunOptions& options() const { return options_; }

 private:
  RunOptions options_;
};

}  // namespace kiln::cli
