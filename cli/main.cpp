// The `kiln` command line: `kiln mcp` (the MCP server on stdio), `kiln run` (a command in the
// sandbox), `kiln secret`, `kiln serve` (published artifacts over HTTP), and as later layers land `kiln publish`.
#include <cstdio>
#include <string>

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include "cli/ceilings.h"
#include "cli/publish.h"
#include "cli/serve.h"
#include "cli/traces.h"
#include "mcp/logging.h"
#include "cli/mcp_runtime.h"
#include "mcp/stdio_transport.h"
#include "cli/commands.h"
#include "workspace/state_dir.h"
#include "workspace/state_store.h"

int main(int argc, char** argv) {
  CLI::App app{"Kiln: workspaces, sandboxed runs, traces and publishing for coding agents, over MCP"};
  app.set_version_flag("--version", std::string("kiln ") + KILN_VERSION);
  app.require_subcommand(1);

  std::string state_dir;
  std::string log_level = "info";
  app.add_option("--state-dir", state_dir, "State directory (default $KILN_HOME, $XDG_STATE_HOME/kiln, ~/.local/state/kiln)");
  app.add_option("--log-level", log_level, "stderr log level: debug, info, warning, error")
      ->check(CLI::IsMember({"debug", "info", "notice", "warning", "error", "critical", "off"}));

  auto* mcp = app.add_subcommand("mcp", "Serve the Model Context Protocol on stdin/stdout");
  std::string workspace;
  kiln::server::StdioOptions stdio;
  mcp->add_option("--workspace", workspace, "Folder to open when the client offers no roots");
  mcp->add_option("--max-message-bytes", stdio.max_message_bytes, "Largest accepted message (default 16 MiB)")
      ->check(CLI::Range(std::size_t(1024), std::size_t(1) << 30));
  mcp->add_option("--state-dir", state_dir, "State directory");
  mcp->add_option("--log-level", log_level, "stderr log level")
      ->check(CLI::IsMember({"debug", "info", "notice", "warning", "error", "critical", "off"}));
  bool allow_unsandboxed = false;
  int sandbox_idle_s = 1800;
  mcp->add_flag("--allow-unsandboxed", allow_unsandboxed,
                "Permit sandbox isolation \"none\" (commands run directly on the host; every result says so)");
  mcp->add_option("--sandbox-idle-s", sandbox_idle_s, "Destroy session sandboxes idle this long (default 1800)")
      ->check(CLI::Range(1, 7 * 24 * 3600));
  kiln::sandbox::HostCeilings ceilings;
  kiln::server::add_ceiling_options(*mcp, ceilings);

  auto* run = app.add_subcommand("run", "Run a command in the sandbox (the same one agents get), streaming its output");
  kiln::server::RunOptions run_opts;
  run->add_option("--network", run_opts.network, "none (default), loopback or host")
      ->check(CLI::IsMember({"none", "loopback", "host"}));
  run->add_option("--workspace", run_opts.workspace, "Folder mounted read-write (default: the current directory)");
  run->add_option("--timeout", run_opts.timeout_s, "Wall-clock seconds; the whole tree is killed after (exit 124)");
  run->add_option("--cpu-s", run_opts.cpu_s, "CPU seconds");
  run->add_option("--memory-mb", run_opts.memory_mb, "Memory limit in MiB");
  run->add_option("--pids", run_opts.pids, "Most processes at once");
  run->add_option("--output-bytes", run_opts.output_bytes, "Kill the command after this much output");
  run->add_option("--file-size-mb", run_opts.file_size_mb, "Largest file a process may write");
  run->add_option("--disk-mb", run_opts.disk_mb, "How far the workspace's filesystem may fill during the run (MiB)");
  run->add_option("--env", run_opts.env, "NAME=VALUE passed into the sandbox (repeatable)");
  run->add_option("--secret", run_opts.secrets, "Secret NAME passed into the sandbox (repeatable)");
  run->add_option("--isolation", run_opts.isolation, "strict (default) or none (needs --allow-unsandboxed)")
      ->check(CLI::IsMember({"strict", "none"}));
  run->add_flag("--allow-unsandboxed", run_opts.allow_unsandboxed, "Permit --isolation none");
  run->add_flag("-v,--verbose", run_opts.verbose, "Print the run report (isolation, limits, resource use) to stderr");
  run->add_option("--state-dir", state_dir, "State directory");
  run->add_option("command", run_opts.command, "The command and its arguments (after --)")->required();
  run->positionals_at_end();

  kiln::server::VerifyOptions verify_opts;
  auto* verify = app.add_subcommand("verify", "Run the workspace's kiln.json checks in a sandbox (exit 0 only on pass)");
  verify->add_option("checks", verify_opts.checks, "Check names (default: all, in kiln.json order)");
  verify->add_option("--workspace,-w", verify_opts.workspace, "Workspace folder (default: the current directory)");
  verify->add_flag("--json", verify_opts.json, "Print the result as JSON on stdout");
  verify->add_option("--junit", verify_opts.junit, "Also write the result as a JUnit XML report to FILE");
  verify->add_flag("--verbose,-v", verify_opts.verbose, "Stream each check's output");
  verify->add_option("--state-dir", state_dir, "State directory");

  auto* secret = app.add_subcommand("secret", "Manage secrets passed into sandboxes by name");
  secret->require_subcommand(1);
  std::string secret_name;
  auto* secret_set = secret->add_subcommand("set", "Store NAME's value, read from stdin (never echoed)");
  secret_set->add_option("name", secret_name, "Secret name (an environment variable name)")->required();
  auto* secret_rm = secret->add_subcommand("rm", "Remove a stored secret");
  secret_rm->add_option("name", secret_name, "Secret name")->required();
  secret->add_subcommand("list", "List stored secret names (never values)");
  secret->add_option("--state-dir", state_dir, "State directory");

  kiln::server::ServeOptions serve_opts;
  auto* serve = app.add_subcommand("serve", "Serve published artifacts over HTTP at /a/NAME/ (kiln publish starts one as needed)");
  serve->add_option("--listen", serve_opts.listen, "HOST:PORT to listen on (default 127.0.0.1:7700; port 0 picks a free one)");
  serve->add_flag("--daemon", serve_opts.daemon, "Run as the state directory's background server (log to <state>/serve.log)");
  serve->add_flag("--mcp", serve_opts.mcp, "Also serve MCP (Streamable HTTP) at /mcp, with the same sessions as kiln mcp");
  serve->add_option("--token-file", serve_opts.token_file,
                    "Bearer tokens for /mcp, lines NAME TOKEN (required beyond loopback; default: <state>/mcp-token)");
  bool print_token = false;
  serve->add_flag("--print-token", print_token, "Print the /mcp bearer token of the state directory and exit");
  serve->add_option("--workspace", serve_opts.workspace, "With --mcp: folder each session opens when its client offers no roots");
  serve->add_flag("--allow-unsandboxed", serve_opts.allow_unsandboxed,
                  "With --mcp: permit sandbox isolation \"none\" (every result says so)");
  serve->add_option("--sandbox-idle-s", serve_opts.sandbox_idle_s, "With --mcp: destroy idle session sandboxes after this long")
      ->check(CLI::Range(1, 7 * 24 * 3600));
  kiln::server::add_ceiling_options(*serve, serve_opts.ceilings);
  serve->add_option("--session-idle-s", serve_opts.session_idle_s,
                    "With --mcp: end an MCP session after this long without requests or open streams (default 1800)")
      ->check(CLI::Range(1, 7 * 24 * 3600));
  serve->add_option("--max-message-bytes", serve_opts.max_message_bytes, "With --mcp: largest accepted message (default 16 MiB)")
      ->check(CLI::Range(std::size_t(1024), std::size_t(1) << 30));
  serve->add_option("--state-dir", state_dir, "State directory");
  serve->add_option("--log-level", log_level, "Log level")
      ->check(CLI::IsMember({"debug", "info", "notice", "warning", "error", "critical", "off"}));

  kiln::server::TracesCommand traces_cmd(app, state_dir);
  kiln::server::PublishCommands publish_cmd(app, state_dir);

  CLI11_PARSE(app, argc, argv);

  kiln::server::init_logging(log_level);
  if (state_dir.empty()) state_dir = kiln::workspace::default_state_dir();
  // Every command reads or writes the state directory: refuse one another user could swap files in.
  if (auto safe = kiln::workspace::secure_state_dir(state_dir, !traces_cmd.parsed()); !safe) {
    std::fprintf(stderr, "kiln: %s\n", safe.error().message.c_str());
    return run->parsed() ? 125 : verify->parsed() ? 2 : 1;
  } else {
    state_dir = *safe;
  }
  if (traces_cmd.parsed()) return traces_cmd.run(state_dir);
  if (publish_cmd.parsed()) return publish_cmd.run(state_dir);
  if (serve->parsed() && print_token) return kiln::server::print_token_command(state_dir);
  if (serve->parsed()) {
    serve_opts.log_level = log_level;
    return kiln::server::serve_command(serve_opts, state_dir);
  }

  if (run->parsed() || secret->parsed() || verify->parsed()) {
    auto store = kiln::workspace::StateStore::open(state_dir);  // makes the state dir (0700)
    if (!store) {
      std::fprintf(stderr, "kiln: %s\n", store.error().message.c_str());
      return run->parsed() ? 125 : verify->parsed() ? 2 : 1;
    }
    if (run->parsed()) return kiln::server::run_command(run_opts, state_dir);
    if (verify->parsed()) return kiln::server::verify_command(verify_opts, state_dir);
    std::string action = secret_set->parsed() ? "set" : secret_rm->parsed() ? "rm" : "list";
    return kiln::server::secret_command(action, secret_name, state_dir);
  }

  if (mcp->parsed()) {
    kiln::server::block_termination_signals();  // before the first thread, see stdio_transport.h
    auto server = kiln::server::open_mcp_runtime({state_dir, workspace, allow_unsandboxed, sandbox_idle_s, ceilings});
    if (!server) {
      std::fprintf(stderr, "kiln: %s\n", server.error().message.c_str());
      return 1;
    }
    return kiln::server::run_stdio(**server, stdio);
  }
  return 0;
}
