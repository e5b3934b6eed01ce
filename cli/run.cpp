// The sandbox on the command line: `kiln run [...] -- CMD...` (the same sandbox as the MCP tools,
// for humans and CI: live output, exit code passed through) and `kiln secret set|list|rm`.
#include <signal.h>
#include <termios.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <thread>

#include <fmt/format.h>

#include "core/path_nesting.h"

#include "sandbox/manager.h"
#include "sandbox/policy.h"
#include "sandbox/secrets.h"
#include "mcp/principal.h"
#include "runs/run_tracing.h"
#include "cli/commands.h"
#include "workspace/kiln_config.h"
#include "traces/trace_store.h"
#include "workspace/path_links.h"
#include "workspace/root.h"
#include "workspace/state_store.h"

namespace kiln::server {

namespace {

using nlohmann::json;
namespace sbx = kiln::sandbox;

void write_all(int fd, std::string_view s) {
  while (!s.empty()) {
    ssize_t n = ::write(fd, s.data(), s.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    s.remove_prefix(std::size_t(n));
  }
}

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

std::stop_source stop_on_termination_signals() {
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  std::stop_source stop;
  std::thread([sigs, stop]() mutable {
    int sig = 0;
    if (sigwait(&sigs, &sig) == 0) stop.request_stop();
  }).detach();
  return stop;
}

std::string default_helper_path() {
  if (const char* e = std::getenv("KILN_SANDBOX_HELPER"); e && *e) return e;
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n > 0) {
    buf[n] = '\0';
    auto dir = std::filesystem::path(buf).parent_path();
    for (auto p : {dir / "kiln-sandbox", dir / "../libexec/kiln/kiln-sandbox"})
      if (::access(p.c_str(), X_OK) == 0) return p.lexically_normal().string();
    return (dir / "kiln-sandbox").string();
  }
  return "kiln-sandbox";
}

int run_command(const RunOptions& o, const std::string& state_dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::string ws = o.workspace.empty() ? fs::current_path(ec).string() : o.workspace;
  auto resolved = workspace::resolve_workspace_path(ws);
  if (!resolved) {
    std::fprintf(stderr, "kiln run: %s\n", resolved.error().message.c_str());
    return 125;
  }
  ws = *resolved;
  auto root = workspace::Root::open_resolved(ws);
  if (!root) {
    std::fprintf(stderr, "kiln run: %s\n", root.error().message.c_str());
    return 125;
  }
  // Before the folder is registered or a check runs: never the state directory, in it or around it.
  if (auto apart = check_apart_from_state_dir(root->path(), state_dir); !apart) {
    std::fprintf(stderr, "kiln run: %s\n", apart.error().message.c_str());
    return 125;
  }
  // Signals are taken by a thread that cancels the run, so Ctrl-C kills the sandboxed tree and
  // kiln still reports and exits with the right code.
  std::stop_source stop = stop_on_termination_signals();

  // The run is recorded like an agent's: a trace under the folder's workspace record. The stores
  // are opened before the sandbox manager so they outlive its last clean-up callback.
  auto state = workspace::StateStore::open(state_dir);
  if (!state) {
    std::fprintf(stderr, "kiln run: %s\n", state.error().message.c_str());
    return 125;
  }
  bool created = false;
  auto ws_rec = (*state)->open_workspace(root->path(), "", &created);
  if (!ws_rec) {
    std::fprintf(stderr, "kiln run: %s\n", ws_rec.error().message.c_str());
    return 125;
  }
  auto trace_store = traces::TraceStore::open(state_dir);
  if (!trace_store) {
    std::fprintf(stderr, "kiln run: %s\n", trace_store.error().message.c_str());
    return 125;
  }
  sbx::ManagerOptions mo;
  mo.state_dir = state_dir;
  mo.helper_path = default_helper_path();
  mo.allow_unsandboxed = o.allow_unsandboxed;
  mo.warm_spares = false;  // one run and out: a spare would never be used
  sbx::SandboxManager m(mo);

  if (auto ok = sbx::check_workspace_root(root->path(), state_dir); !ok) {
    std::fprintf(stderr, "kiln run: %s\n", ok.error().message.c_str());
    return 125;
  }
  LoadedConfig cfg = load_config(*root);
  if (!cfg.error.empty()) std::fprintf(stderr, "kiln run: warning: %s (its sandbox defaults are not applied)\n", cfg.error.c_str());
  sbx::PolicyInput in;
  in.config_sandbox = cfg.config.value("sandbox", json::object());
  in.args = json::object();
  if (!o.network.empty()) in.args["network"] = o.network;
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
  RunTracer tracer(**trace_store, nullptr, &m);
  in.workspace_root = root->path();
  in.workspace_id = ws_rec->id;
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
  fs::path cwd = fs::current_path(ec);
  std::string cwd_s = cwd.string();
  req.cwd = (cwd_s == root->path() || cwd_s.starts_with(root->path() + "/")) ? cwd_s : root->path();
  req.tail_bytes = 0;
  req.live_output = [](bool is_err, std::string_view chunk) { write_all(is_err ? 2 : 1, chunk); };
  ExecTraceInfo info;
  info.workspace_id = ws_rec->id;
  info.client = json{{"name", "kiln run"}, {"version", KILN_VERSION}};
  info.principal = local_principal();
  info.policy = policy_json(*policy);
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

int secret_command(const std::string& action, const std::string& name, const std::string& state_dir) {
  sbx::SecretStore store(state_dir);
  if (action == "list") {
    for (const auto& n : store.names()) std::printf("%s\n", n.c_str());
    return 0;
  }
  if (action == "rm") {
    auto r = store.remove(name);
    if (!r) {
      std::fprintf(stderr, "kiln secret: %s\n", r.error().message.c_str());
      return 1;
    }
    std::fprintf(stderr, "%s %s\n", *r ? "removed" : "no secret named", name.c_str());
    return *r ? 0 : 1;
  }
  // set: the value comes from stdin, never from argv (it would show in ps and shell history).
  bool tty = ::isatty(0);
  termios old{};
  if (tty) {
    std::fprintf(stderr, "Value for %s (input hidden, end with Enter): ", name.c_str());
    ::tcgetattr(0, &old);
    termios quiet = old;
    quiet.c_lflag &= ~tcflag_t(ECHO);
    ::tcsetattr(0, TCSANOW, &quiet);
  }
  std::string value;
  if (tty) {
    std::getline(std::cin, value);
    ::tcsetattr(0, TCSANOW, &old);
    std::fprintf(stderr, "\n");
  } else {
    value.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    while (!value.empty() && (value.back() == '\n' || value.back() == '\r')) value.pop_back();
  }
  if (value.empty()) {
    std::fprintf(stderr, "kiln secret: empty value; nothing stored\n");
    return 1;
  }
  auto r = store.set(name, value);
  if (!r) {
    std::fprintf(stderr, "kiln secret: %s\n", r.error().message.c_str());
    return 1;
  }
  std::fprintf(stderr, "stored secret %s (%zu bytes, mode 0600)\n", name.c_str(), value.size());
  return 0;
}

}  // namespace kiln::server
