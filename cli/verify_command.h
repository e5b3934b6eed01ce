// `kiln verify [CHECK...]`: the workspace's kiln.json checks in a sandbox, for people and CI, with
// the same engine (and trace) as the verify tool agents call.
#pragma once

#include <string>
#include <vector>

#include "cli/command.h"

namespace kiln::cli {

struct VerifyOptions {
  std::string workspace;            // default: the current directory
  std::vector<std::string> checks;  // default: all
  bool json = false, verbose = false;
  std::string junit;                // write a JUnit XML report here
};

// Exit codes: 0 pass, 1 fail, 2 error (no checks, a bad kiln.json, a sandbox that cannot start).
int run_verify_checks(const VerifyOptions& options, const std::string& state_dir);

class VerifyCommand final : public Command {
 public:
  std::string_view name() const override { return "verify"; }
  CLI::App& configure(CLI::App& app) override;
  int state_dir_failure_exit() const override { return 2; }
  int run(const GlobalOptions& global) override;
  const VerifyOptions& options() const { return options_; }

 private:
  VerifyOptions options_;
};

}  // namespace kiln::cli
