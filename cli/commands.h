// The one-shot subcommands that run sandboxed work from the command line (`kiln run`, `kiln secret`,
// `kiln verify`) and what they share; main.cpp parses the flags into these options.
#pragma once

#include <cstdint>
#include <stop_token>
#include <string>
#include <vector>

namespace kiln::server {

// `kiln run` and `kiln secret` (cli/run.cpp).
struct RunOptions {
  std::string workspace, network, isolation;
  double timeout_s = 0, cpu_s = 0;
  std::uint64_t memory_mb = 0, pids = 0, output_bytes = 0, file_size_mb = 0, disk_mb = 0;
  std::vector<std::string> env, secrets, command;
  bool allow_unsandboxed = false, verbose = false;
};
int run_command(const RunOptions& options, const std::string& state_dir);

// `kiln verify` (cli/verify.cpp): exit 0 on pass, 1 on fail, 2 on error.
struct VerifyOptions {
  std::string workspace;            // default: the current directory
  std::vector<std::string> checks;  // default: all
  bool json = false, verbose = false;
  std::string junit;                // write a JUnit XML report here
};
int verify_command(const VerifyOptions& options, const std::string& state_dir);
int secret_command(const std::string& action, const std::string& name, const std::string& state_dir);
// For one-shot commands (`kiln run`, `kiln verify`): SIGINT, SIGTERM and SIGHUP are taken by a
// thread that requests the returned stop, so Ctrl-C kills the sandboxed tree and kiln still
// reports and exits with the right code. Call before any other thread starts.
std::stop_source stop_on_termination_signals();
// KILN_SANDBOX_HELPER, else kiln-sandbox next to the kiln binary.
std::string default_helper_path();

}  // namespace kiln::server
