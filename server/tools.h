// Registration of every tool family; each lives in its own tools_*.cpp file.
#pragma once

#include <cstdint>
#include <stop_token>
#include <string>
#include <vector>

namespace kiln::sandbox { class SandboxManager; }
namespace kiln::traces { class TraceStore; }
namespace kiln::artifacts { class ArtifactStore; }

namespace kiln::server {

class ToolRegistry;
class RunTracer;

// workspace_open, workspace_list, workspace_info (which lists live sandboxes, traces and
// artifacts when given their stores)
void register_workspace_tools(ToolRegistry& registry, sandbox::SandboxManager* sandboxes = nullptr,
                              traces::TraceStore* traces = nullptr, artifacts::ArtifactStore* artifacts = nullptr);
void register_file_tools(ToolRegistry& registry);       // file_read, file_write, file_edit, file_move, file_delete
void register_search_tools(ToolRegistry& registry);     // file_list, file_search
// sandbox_create, sandbox_exec, sandbox_list, sandbox_destroy, process_output, process_input, process_kill
void register_sandbox_tools(ToolRegistry& registry, sandbox::SandboxManager& sandboxes, RunTracer* tracer = nullptr);

// trace_list, trace_get, trace_output, verify (server/tools_traces.cpp, server/tools_verify.cpp)
void register_trace_tools(ToolRegistry& registry, RunTracer& tracer, sandbox::SandboxManager& sandboxes);

// `kiln run` and `kiln secret` (server/tools_sandbox_cli.cpp).
struct RunOptions {
  std::string workspace, network, isolation;
  double timeout_s = 0, cpu_s = 0;
  std::uint64_t memory_mb = 0, pids = 0, output_bytes = 0, file_size_mb = 0, disk_mb = 0;
  std::vector<std::string> env, secrets, command;
  bool allow_unsandboxed = false, verbose = false;
};
int run_command(const RunOptions& options, const std::string& state_dir);

// `kiln verify` (server/cli_verify.cpp): exit 0 on pass, 1 on fail, 2 on error.
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
