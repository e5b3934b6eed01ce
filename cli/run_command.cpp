// `kiln run`: the command line's sandbox (the same one the MCP tools use); its stores are opened
// the way an agent's run opens them, so the run gets a trace under the folder's workspace.
#include "cli/blob_owners.h"
#include "cli/run_command.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/local_workspace.h"
#include "cli/process_setup.h"
#include "core/fd_io.h"
#include "sandbox/manager.h"
#include "sandbox/policy.h"
#include "workspace/kiln_config.h"
#include "mcp/principal.h"
#include "runs/run_tracing.h"
#include "mcp/workspace_opening.h"

namespace kiln::cli {

namespace {

using nlohmann::json;
using server::local_principal;
namespace sbx = kiln::sandbox;

int exit_code_for(const sbx::ExecResult& r) {
  switch (r.stop_reason) {
    case sbx::StopReason::exit: return r.exit_code.value_or(0);
    case sbx::StopReason::timeout: return 124;  // like coreutils timeout
    case sbx::StopReason::setup_failed: return 125;
    case sbx::StopReason::cancelled: return 130;
    default: return r.signal ? 128 + r.signal : r.exit_code.value_or(1);
  }
}

}  // namespace

int run_in_sandbox(const RunOptions& o, const std::string& state_dir) {
  namespace fs = std::filesystem;
  // The run is recorded like an agent's: a trace under the folder's workspace record.
  auto local = open_local_workspace(o.workspace, state_dir);
  if (!local) {
    std::fprintf(stderr, "kiln run: %s\n", local.error().message.c_str());
    return 125;
  }
  const workspace::Root& root = local->root;
  const workspace::WorkspaceRecord& ws_rec = local->record;
  // Signals are taken by a thread that cancels the run, so Ctrl-C kills the sandboxed tree and
  // kiln still reports and exits with the right code.
  std::stop_source stop = stop_on_termination_signals();

  sbx::ManagerOptions mo;
  mo.state_dir = state_dir;
  mo.helper_path = default_helper_path();
  mo.allow_unsandboxed = o.allow_unsandboxed;
  mo.warm_spares = false;  // one run and out: a spare would never be used
  mo.zygote = false;       // nor a zygote: it would be one more process start before the helper's
  sbx::SandboxManager m(mo);

  if (auto ok = sbx::check_workspace_root(root.path(), state_dir); !ok) {
    std::fprintf(stderr, "kiln run: %s\n", ok.error().message.c_str());
    return 125;
  }
  server::LoadedConfig cfg = server::load_config(root);
  if (!cfg.error.empty()) std::fprintf(stderr, "kiln run: warning: %s (its sandbox defaults are not applied)\n", cfg.error.c_str());
  sbx::PolicyInput in;
  in.config_sandbox = cfg.config.value("sandbox", json::object());
  in.args = json::object();
  // A JSON object is an allowlist: --network '{"allow":["registry.npmjs.org"]}'.
  if (!o.network.empty() && o.network.front() == '{') {
    json j = json::parse(o.network, nullptr, false);
    if (j.is_discarded()) {
      std::fprintf(stderr, "kiln run: --network is not valid JSON; write e.g. --network '{\"allow\":[\"example.org\"]}'\n");
      return 2;
    }
    in.args["network"] = std::move(j);
  } else if (!o.network.empty()) {
    in.args["network"] = o.network;
  }
  if (!o.isolation.empty()) in.args["isolation"] = o.isolation;
  json limits = json::object();
  if (o.timeout_s > 0) limits["wall_s"] = o.timeout_s;
  if (o.cpu_s > 0) limits["cpu_s"] = o.cpu_s;
  if (o.memory_mb > 0) limits["memory_mb"] = o.memory_mb;
  if (o.pids > 0) limits["pids"] = o.pids;
  if (o.output_bytes > 0) limits["output_bytes"] = o.output_bytes;
  if (o.file_size_mb > 0) limits["file_size_mb"] = o.file_size_mb;
  if (o.disk_mb > 0) limits["disk_mb"] = o.disk_mb;
  if (!limits.empty()) in.args["limits"] = limits;
  json env = json::object();
  for (const auto& kv : o.env) {
    auto eq = kv.find('=');
    if (eq == std::string::npos) {
      std::fprintf(stderr, "kiln run: --env wants NAME=VALUE, got '%s'\n", kv.c_str());
      return 125;
    }
    env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  if (!env.empty()) in.args["env"] = env;
  if (!o.secrets.empty()) in.args["secrets"] = o.secrets;
  server::RunTracer tracer(*local->traces, nullptr, &m);
  // What the command changed goes in its trace, as for an agent's sandbox_exec.
  auto owners = open_blob_owners(state_dir);
  if (owners) tracer.set_checkpoints(owners->checkpoints.get());
  in.workspace_root = root.path();
  in.workspace_id = ws_rec.id;
  auto policy = sbx::make_policy(in);
  if (policy) policy->owner = local_principal();  // the CLI acts as the local user
  if (policy) {
    if (auto ok = m.finalize_policy(*policy); !ok) policy = std::unexpected(ok.error());
  }
  if (!policy) {
    std::fprintf(stderr, "kiln run: %s\n", policy.error().message.c_str());
    return 125;
  }
  // Unlimited output on the terminal unless asked: the cap protects a server's memory, and
  // here everything streams straight through.
  if (!policy->requested.output_bytes) policy->limits.output_bytes = ~0ull >> 1;

  sbx::ExecRequest req;
  req.owner = local_principal();
  req.argv = o.command;
  req.display_command = fmt::format("{}", fmt::join(o.command, " "));
  std::error_code ec;
  fs::path cwd = fs::current_path(ec);
  std::string cwd_s = cwd.string();
  req.cwd = (cwd_s == root.path() || cwd_s.starts_with(root.path() + "/")) ? cwd_s : root.path();
  req.tail_bytes = 0;
  req.live_output = [](bool is_err, std::string_view chunk) { write_all(is_err ? 2 : 1, chunk); };
  server::ExecTraceInfo info;
  info.workspace_id = ws_rec.id;
#include "core/fd_io.h"
  info.client = json{{"name", "kiln run"}, {"version", KILN_VERSION}};
  info.principal = local_principal();
  info.policy = server::policy_json(*policy);
  if (auto cfg = server::load_config(root); owners && (!cfg.typed || cfg.typed->checkpoints_auto)) {
    if (auto r = workspace::Root::open_resolved(root.path()))
      info.checkpoint_root = std::make_shared<const workspace::Root>(std::move(*r));
  }
  auto trace_id = tracer.attach(req, info);
  if (!trace_id) {
    std::fprintf(stderr, "kiln run: could not record the run's trace: %s\n", trace_id.error().message.c_str());
    return 125;
  }
  auto r = m.exec("", &*policy, std::move(req), stop.get_token());
  if (!r) {
    traces::TraceFinish f;
    f.status = "error";
    f.stop_reason = "setup_failed";
    f.error = m.redact(r.error().message);
    (void)tracer.store().finish(*trace_id, f);
    std::fprintf(stderr, "kiln run: %s\n", m.redact(r.error().message).c_str());
    return r.error().code == Errc::cancelled ? 130 : 125;
  }
  if (!r->warning.empty()) std::fprintf(stderr, "kiln run: WARNING: %s\n", r->warning.c_str());
  if (o.verbose) {
    json rep = {{"run_id", r->run_id}, {"trace_id", *trace_id}, {"stop_reason", sbx::to_string(r->stop_reason)}, {"exit_code", r->exit_code ? json(*r->exit_code) : json(nullptr)},
                {"signal", r->signal}, {"duration_ms", r->duration_precise_ms}, {"limits_hit", r->limits_hit},
                {"peak_memory_bytes", r->peak_memory_bytes ? json(*r->peak_memory_bytes) : json(nullptr)},
                {"cpu_user_ms", r->user_ms}, {"cpu_sys_ms", r->sys_ms}, {"isolation", r->isolation}};
    std::fprintf(stderr, "%s\n", m.redact(rep.dump(2)).c_str());
  }
  // A refused destination is the one thing a person must act on (add it to the allowlist), so
  // say so here rather than only in the trace.
  if (r->network_log.is_array()) {
    std::size_t refused = 0;
    for (const auto& e : r->network_log) {
      if (e.value("decision", "") == "allowed") continue;
      if (++refused <= 5)
        std::fprintf(stderr, "kiln run: network: refused %s:%s: %s\n", e.value("host", "").c_str(),
                     e.contains("port") ? e["port"].dump().c_str() : "?", e.value("reason", "").c_str());
    }
    if (refused > 5) std::fprintf(stderr, "kiln run: network: %zu more refused\n", refused - 5);
    if (refused) std::fprintf(stderr, "kiln run: network: the log is in kiln traces show %s\n", trace_id->c_str());
  }
  switch (r->stop_reason) {
    case sbx::StopReason::exit:
    case sbx::StopReason::signal: break;
    case sbx::StopReason::timeout:
      std::fprintf(stderr, "kiln run: timed out after %.1f s; the whole process tree was killed\n", r->duration_precise_ms / 1000);
      break;
    default:
      std::fprintf(stderr, "kiln run: stopped: %s%s\n", sbx::to_string(r->stop_reason),
                   r->limits_hit.empty() ? "" : fmt::format(" (limits hit: {})", fmt::join(r->limits_hit, ", ")).c_str());
  }
  return exit_code_for(*r);
}

CLI::App& RunCommand::configure(CLI::App& app) {
  auto* run = app.add_subcommand("run", "Run a command in the sandbox (the same one agents get), streaming its output");
  run->footer(
      "Example: kiln run --network loopback -- make test\n"
      "The folder's kiln.json \"sandbox\" settings apply; options here override them. Exit: the command's own "
      "code; 124 timed out, 125 kiln could not start it, 130 interrupted, 128+N killed by signal N.");
  RunOptions& o = options_;
  run->add_option("--network", o.network, "none (default), loopback, host, or an allowlist as JSON: '{\"allow\":[\"registry.npmjs.org\"]}'")
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            if (v == "none" || v == "loopback" || v == "host" || (!v.empty() && v.front() == '{')) return {};
            return "--network must be none, loopback, host or a JSON allowlist like '{\"allow\":[\"example.org\"]}'";
          },
          "NETWORK"));
  run->add_option("--workspace", o.workspace, "Folder mounted read-write (default: the current directory)");
  run->add_option("--timeout", o.timeout_s, "Wall-clock seconds; the whole tree is killed after (exit 124)");
  run->add_option("--cpu-s", o.cpu_s, "CPU seconds");
  run->add_option("--memory-mb", o.memory_mb, "Memory limit in MiB");
  run->add_option("--pids", o.pids, "Most processes at once");
  run->add_option("--output-bytes", o.output_bytes, "Kill the command after this much output");
  run->add_option("--file-size-mb", o.file_size_mb, "Largest file a process may write");
  run->add_option("--disk-mb", o.disk_mb, "How far the workspace's filesystem may fill during the run (MiB)");
  run->add_option("--env", o.env, "NAME=VALUE passed into the sandbox (repeatable)");
  run->add_option("--secret", o.secrets, "Secret NAME passed into the sandbox (repeatable)");
  run->add_option("--isolation", o.isolation, "strict (default) or none (needs --allow-unsandboxed)")
      ->check(CLI::IsMember({"strict", "none"}));
  run->add_flag("--allow-unsandboxed", o.allow_unsandboxed, "Permit --isolation none");
  run->add_flag("-v,--verbose", o.verbose, "Print the run report (isolation, limits, resource use) to stderr");
  run->add_option("command", o.command, "The command and its arguments (after --)")->required();
  run->positionals_at_end();
  return *run;
}

int RunCommand::run(const GlobalOptions& global) {
  if (!state_store_opens(global.state_dir)) return 125;
  return run_in_sandbox(options_, global.state_dir);
}

}  // namespace kiln::cli
