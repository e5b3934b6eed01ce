// sandbox_create, sandbox_exec, sandbox_list, sandbox_destroy: decode arguments (already checked
// against schemas/tools/sandbox_*.json), build the policy from kiln.json + arguments, call the
// sandbox engine, encode the result. Every text leaving here passes the secret redactor.
#include <climits>
#include <cmath>
#include <filesystem>

#include <fmt/format.h>

#include "core/quote.h"
#include "sandbox/manager.h"
#include "sandbox/output_spool.h"
#include "sandbox/policy.h"
#include "sandbox/secrets.h"
#include "tools/secret_prompt.h"
#include "runs/run_tracing.h"
#include "services/service_host.h"
#include "mcp/session_state.h"
#include "mcp/tool_registry.h"
#include "tools/tools.h"
#include "tools/sandbox_common.h"
#include "workspace/kiln_config.h"
#include "workspace/state_store.h"

namespace kiln::server {

namespace {

using nlohmann::json;
namespace sbx = kiln::sandbox;


// `env` of sandbox_create belongs to the sandbox (every exec in it sees it); sandbox_exec's `env`
// is per exec (ExecRequest::env), also in a session sandbox, so it is not a policy argument there.
// `loaded`, when given, receives the kiln.json read here (sandbox_create needs its services too).
Result<sbx::SandboxPolicy> policy_for(CallContext& ctx, sbx::SandboxManager& m, const OpenWorkspace& ws,
                                      const json& args, std::string* config_error, bool with_env = false,
                                      LoadedConfig* loaded = nullptr) {
  const std::string root = ws.root->path();
  if (auto ok = sbx::check_workspace_root(root, ctx.session->store().dir()); !ok) return std::unexpected(ok.error());
  LoadedConfig local;
  LoadedConfig& cfg = loaded ? *loaded : local;
  cfg = load_config(*ws.root);
  if (config_error && !cfg.error.empty()) *config_error = cfg.error;
  sbx::PolicyInput in;
  in.config_sandbox = cfg.config.value("sandbox", json::object());
  in.args = json::object();
  for (const char* k : kPolicyArgs)
    if (args.contains(k)) in.args[k] = args[k];
  if (with_env && args.contains("env")) in.args["env"] = args["env"];
  in.workspace_root = root;
  in.workspace_id = ws.id;
  auto p = sbx::make_policy(in);
  if (!p) return std::unexpected(p.error());
  p->owner = ctx.session->principal();  // the sandbox is its principal's alone
  if (auto ok = m.finalize_policy(*p); !ok) return std::unexpected(ok.error());
  return p;
}

// cwd inside the sandbox: relative to the workspace root, or absolute inside the root or /tmp.
Result<std::string> resolve_cwd(const std::string& root, const json& args) {
  namespace fs = std::filesystem;
  std::string cwd = args.value("cwd", "");
  if (cwd.empty() || cwd == ".") return root;
  // No folder has a longer path, and the helper's control message must not carry megabytes.
  if (cwd.size() > PATH_MAX)
    return fail(Errc::invalid_argument,
                fmt::format("cwd '{}' is longer than the {} bytes a path can have", bounded(cwd), PATH_MAX));
  fs::path p = fs::path(cwd).is_absolute() ? fs::path(cwd) : fs::path(root) / cwd;
  p = p.lexically_normal();
  std::string s = p.string();
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  auto inside = [&](const std::string& base) { return s == base || s.starts_with(base + "/"); };
  // A relative cwd must stay in the workspace; the sandbox's private /tmp only by absolute path
  // (a workspace that itself lives under /tmp must not make "../" acceptable).
  bool relative = !fs::path(cwd).is_absolute();
  if (cwd.find('\0') != std::string::npos || cwd.find('\n') != std::string::npos ||
      !(inside(root) || (!relative && inside("/tmp"))))
    return fail(Errc::path_escape,
                fmt::format("cwd '{}' is outside the workspace: pass a folder relative to the workspace root, or "
                            "an absolute path inside it or inside /tmp",
                            bounded(cwd)));
  return s;
}

}  // namespace

json client_json(const CallContext& ctx) {
  if (!ctx.session) return nullptr;
  auto c = ctx.session->client();
  return json{{"name", c.name}, {"version", c.version}};
}

namespace {

// The services argument: names, or true for every service kiln.json declares.
Result<std::vector<std::string>> wanted_services(const json& args, const LoadedConfig& cfg) {
  std::vector<std::string> names;
  if (!args.contains("services")) return names;
  const json& v = args.at("services");
  if (!cfg.error.empty())
    return fail(Errc::invalid_argument, cfg.error + "; fix kiln.json, then create the sandbox with its services");
  if (v.is_boolean()) {
    if (!v.get<bool>()) return names;
    if (!cfg.typed || cfg.typed->services.empty())
      return fail(Errc::invalid_argument, "services: true, but kiln.json declares no \"services\"; add e.g. "
                                          "{\"services\": {\"db\": {\"kind\": \"postgres\"}}}");
    for (const auto& s : cfg.typed->services) names.push_back(s.name);
    return names;
  }
  for (const auto& n : v) names.push_back(n.get<std::string>());
  return names;
}

Result<ToolOutput> sandbox_create(CallContext& ctx, sbx::SandboxManager& m, services::ServiceHost* services,
                                  const json& args) {
  auto ws = ctx.session->workspace_for(args);
  if (!ws) return std::unexpected(ws.error());
  std::string config_error;
  LoadedConfig cfg;
  auto policy = policy_for(ctx, m, **ws, args, &config_error, /*with_env=*/true, &cfg);
  if (!policy) return std::unexpected(policy.error());
  auto names = wanted_services(args, cfg);
  if (!names) return std::unexpected(names.error());
  std::shared_ptr<services::ServiceHost::Prepared> prepared;
  if (!names->empty()) {
    if (!services) return fail(Errc::unsupported, "this server runs no services");
    if (policy->isolation == sbx::Isolation::none)
      return fail(Errc::invalid_argument, "services run only in strict sandboxes; drop isolation: none");
    services::ServiceRequest sr;
    sr.config = cfg.typed ? &*cfg.typed : nullptr;
    sr.names = *names;
    sr.use = services::DataUse::development;
    sr.workspace_id = (*ws)->id;
    sr.workspace_root = (*ws)->root->path();
    sr.owner = ctx.session->principal();
    sr.client = client_json(ctx);
    auto p = services->prepare(sr, *policy, ctx.stop);
    if (!p) return std::unexpected(p.error());
    prepared = std::move(*p);
  }
  auto info = m.create(std::move(*policy), ctx.stop);
  if (!info) return std::unexpected(info.error());
  json service_list = json::array();
  if (prepared) {
    auto started = services->start(std::move(prepared), info->sandbox_id, ctx.stop);
    if (!started) {
      // Nothing half started stays behind: the sandbox goes with its services.
      (void)m.destroy(ctx.session->principal(), info->sandbox_id);
      return std::unexpected(started.error());
    }
    for (const auto& s : *started) service_list.push_back(services::to_json(s));
  }
  json out = {{"sandbox_id", info->sandbox_id},
              {"workspace", (*ws)->id},
              {"root", (*ws)->root->path()},
              {"isolation", info->isolation},
              {"setup_ms", info->setup_ms},
              {"idle_timeout_s", double(m.options().idle_timeout.count())}};
  if (!names->empty()) out["services"] = std::move(service_list);
  if (!info->warning.empty()) out["warning"] = info->warning;
  if (!config_error.empty()) out["config_error"] = config_error;
  return ToolOutput{std::move(out)};
}

json stream_json(const sbx::StreamTail& t) {
  return {{"total_bytes", t.total_bytes}, {"tail_offset", t.tail_offset}, {"truncated", t.truncated},
          {"dropped_bytes", t.dropped_bytes}};
}

std::string describe_stop(const sbx::ExecResult& r) {
  switch (r.stop_reason) {
    case sbx::StopReason::exit: return fmt::format("exited with code {}", r.exit_code.value_or(0));
    case sbx::StopReason::signal: return fmt::format("killed by {} ({})", sbx::signal_name(r.signal), r.signal);
    case sbx::StopReason::timeout: return "timed out; the whole process tree was killed";
    case sbx::StopReason::cpu_limit: return "hit the CPU time limit (cpu_s)";
    case sbx::StopReason::memory_limit: return "hit the memory limit (memory_mb) and was OOM-killed";
    case sbx::StopReason::pids_limit: return "hit the process limit (pids)";
    case sbx::StopReason::disk_limit: return "filled the disk past its budget (disk_mb) or the server's free-space reserve";
    case sbx::StopReason::output_limit: return "produced more output than output_bytes; the tree was killed";
    case sbx::StopReason::cancelled: return "was cancelled; the whole process tree was killed";
    case sbx::StopReason::killed: return "was killed";
    case sbx::StopReason::setup_failed: return "could not be started";
    case sbx::StopReason::interrupted: return "was interrupted";
  }
  return "ended";
}

// The services of a session sandbox as an exec result shows them: a service that died since shows
// up here, in the next exec's result.
json services_json(services::ServiceHost* services, const std::string& owner, const std::string& sandbox_id) {
  json list = json::array();
  if (!services || sandbox_id.empty()) return list;
  for (const auto& s : services->list(owner, sandbox_id)) {
    json j = {{"name", s.name}, {"state", s.state}, {"url", s.url}};
    if (!s.error.empty()) j["error"] = s.error;
    list.push_back(std::move(j));
  }
  return list;
}

// kiln.json "checkpoints": {"auto": false} turns them off; a kiln.json that does not parse leaves
// them on (the default), as it leaves every other setting at its default.
bool checkpoints_on(const workspace::Root& root) {
  LoadedConfig cfg = load_config(root);
  return !cfg.typed || cfg.typed->checkpoints_auto;
}

Result<ToolOutput> sandbox_exec(CallContext& ctx, sbx::SandboxManager& m, RunTracer* tracer,
                                services::ServiceHost* services, const json& args) {
  const std::string sandbox_id = args.value("sandbox_id", "");
  std::optional<sbx::SandboxPolicy> fresh;
  std::string root;
  std::shared_ptr<const workspace::Root> ws_root;  // for the checkpoints around the run
  if (!sandbox_id.empty()) {
    for (const char* k : kPolicyArgs) {
      if (args.contains(k))
        return fail(Errc::invalid_argument,
                    fmt::format("`{}` is fixed when a sandbox is created: pass it to sandbox_create, or omit "
                                "sandbox_id to run in a fresh sandbox with it",
                                k));
    }
    auto p = m.policy_of(ctx.session->principal(), sandbox_id);
    if (!p)
      return fail(Errc::not_found, fmt::format("no live sandbox '{}': create one with sandbox_create (idle sandboxes "
                                               "are reaped), or omit sandbox_id to run in a fresh sandbox",
                                               bounded(sandbox_id)));
    root = p->workspace_root;
    if (auto r = workspace::Root::open_resolved(root)) ws_root = std::make_shared<const workspace::Root>(std::move(*r));
  } else {
    auto ws = ctx.session->workspace_for(args);
    if (!ws) return std::unexpected(ws.error());
    auto p = policy_for(ctx, m, **ws, args, nullptr);
    if (!p) return std::unexpected(p.error());
    root = (*ws)->root->path();
    ws_root = (*ws)->root;
    fresh = std::move(*p);
  }
  sbx::ExecRequest req;
  req.owner = ctx.session->principal();
  const json& cmd = args.at("command");
  if (cmd.is_string()) {
    req.argv = {"/bin/sh", "-c", cmd.get<std::string>()};
    req.display_command = cmd.get<std::string>();
  } else {
    for (const auto& a : cmd) req.argv.push_back(a.get<std::string>());
    req.display_command = cmd.dump();
  }
  for (const auto& a : req.argv)
    if (a.find('\0') != std::string::npos) return fail(Errc::invalid_argument, "command contains a NUL byte");
  auto cwd = resolve_cwd(root, args);
  if (!cwd) return std::unexpected(cwd.error());
  req.cwd = *cwd;
  if (args.contains("stdin")) req.stdin_data = args["stdin"].get<std::string>();
  if (args.contains("timeout_s")) req.timeout_s = args["timeout_s"].get<double>();
  args.at("tail_bytes").get_to(req.tail_bytes);
  if (args.contains("env")) {
    for (const auto& [k, v] : args["env"].items()) {
      if (!sbx::valid_secret_name(k))
        return fail(Errc::invalid_argument, fmt::format("env: '{}' is not a valid environment variable name", bounded(k)));
      req.env[k] = v.get<std::string>();
    }
  }
  const bool background = args.at("background");
  const sbx::SandboxPolicy* fp = fresh ? &*fresh : nullptr;

  // The trace is written before the command starts, so even a server killed mid-run leaves a
  // record (marked interrupted at the next start). Its row goes in on the tracer's writer thread
  // while the run is prepared; the command is handed to the sandbox only once it is in.
  std::string trace_id;
  std::shared_future<Result<void>> trace_row;
  if (tracer) {
    ExecTraceInfo info;
    auto policy = fresh ? std::optional<sbx::SandboxPolicy>(*fresh) : m.policy_of(req.owner, sandbox_id);
    info.workspace_id = policy ? policy->workspace_id : std::string();
    info.client = client_json(ctx);
    info.principal = req.owner;
    if (policy) info.policy = policy_json(*policy);
    if (info.policy.is_object())
      for (const auto& [k, v] : req.env) info.policy["env_names"].push_back(k);  // per-exec env too
    if (json svc = services_json(services, req.owner, sandbox_id); !svc.empty() && info.policy.is_object())
      info.policy["services"] = std::move(svc);
    if (ws_root && checkpoints_on(*ws_root)) info.checkpoint_root = ws_root;
    auto id = tracer->attach(req, info, &trace_row);
    if (!id) return fail(id.error().code, "could not record the run's trace: " + id.error().message);
    trace_id = *id;
  }
  // A run that never started (no sandbox, refused request) still ends its trace, as an error.
  auto end_trace_on_error = [&](const Error& e) {
    if (trace_id.empty()) return;
    if (trace_row.valid() && !trace_row.get()) return;  // no row was written: nothing to end
    traces::TraceFinish f;
    const bool cancelled = e.code == Errc::cancelled || ctx.stop.stop_requested();
    f.status = cancelled ? "fail" : "error";
    f.stop_reason = cancelled ? "cancelled" : "setup_failed";
    f.error = m.redact(e.message);
    if (tracer->store().finish(trace_id, f)) tracer->changed(trace_id);
  };

  if (background) {
    auto r = m.start(sandbox_id, fp, std::move(req), ctx.stop);
    if (!r) {
      end_trace_on_error(r.error());
      return std::unexpected(r.error());
    }
    json out = {{"run_id", r->run_id}, {"sandbox_id", r->sandbox_id}, {"background", true}, {"pid", r->pid},
                {"cwd", *cwd}, {"isolation", r->isolation},
                {"trace_id", trace_id.empty() ? json(nullptr) : json(trace_id)},
                {"trace_uri", trace_id.empty() ? json(nullptr) : json(trace_uri(trace_id))},
                {"how_to_page", fmt::format("process_output {{\"run_id\": \"{}\", \"wait_ms\": 5000}} follows its "
                                            "output; process_input writes its stdin; process_kill stops it",
                                            r->run_id)}};
    if (!r->warning.empty()) out["warning"] = r->warning;
    return ToolOutput{std::move(out)};
  }

  sbx::OutputObserver observer;
  if (ctx.progress_token && ctx.progress) {
    observer = [&ctx, &m](std::uint64_t bytes, std::string_view text) {
      ctx.progress(double(bytes), std::nullopt, m.redact(text));
    };
  }
  auto r = m.exec(sandbox_id, fp, std::move(req), ctx.stop, std::move(observer));
  if (!r) {
    end_trace_on_error(r.error());
    return std::unexpected(r.error());
  }
  if (!r->output_error.empty()) {
    // The command ran, but what it printed is not kept: a result would look whole while its pages
    // are gone, so this is an error that still says how the command ended.
    auto last = [](const std::string& t) {
      return t.size() > 2000 ? sbx::sanitize_utf8(std::string_view(t).substr(t.size() - 2000)) : t;
    };
    return fail(Errc::io,
                fmt::format("{} {}, but {}. Free space in the state directory (or set KILN_HOME to a folder on a "
                            "larger disk) and run it again. Trace {}. Last output:\n{}{}",
                            r->run_id, describe_stop(*r), r->output_error, trace_id.empty() ? "none" : trace_id,
                            last(r->out.text), last(r->err.text)));
  }
  json out = {{"run_id", r->run_id},
              {"sandbox_id", r->sandbox_id},
              {"background", false},
              {"fresh_sandbox", r->fresh_sandbox},
              {"exit_code", r->exit_code ? json(*r->exit_code) : json(nullptr)},
              {"signal", r->signal ? json(r->signal) : json(nullptr)},
              {"stop_reason", sbx::to_string(r->stop_reason)},
              {"duration_ms", std::round(r->duration_precise_ms * 1000) / 1000},
              {"stdout", r->out.text},
              {"stderr", r->err.text},
              {"truncated", r->out.truncated || r->err.truncated},
              {"stdout_truncated", r->out.truncated},
              {"stderr_truncated", r->err.truncated},
              {"stdout_total_bytes", r->out.total_bytes},
              {"stderr_total_bytes", r->err.total_bytes},
              {"output", {{"stdout", stream_json(r->out)}, {"stderr", stream_json(r->err)}}},
              {"limits_hit", r->limits_hit},
              {"peak_memory_bytes", r->peak_memory_bytes ? json(*r->peak_memory_bytes) : json(nullptr)},
              {"cpu_user_ms", r->user_ms},
              {"cpu_sys_ms", r->sys_ms},
              {"cwd", *cwd},
              {"isolation", r->isolation},
              {"trace_id", trace_id.empty() ? json(nullptr) : json(trace_id)},
              {"trace_uri", trace_id.empty() ? json(nullptr) : json(trace_uri(trace_id))}};
  if (r->signal) out["signal_name"] = sbx::signal_name(r->signal);
  if (json svc = services_json(services, ctx.session->principal(), sandbox_id); !svc.empty()) {
    for (const auto& s : svc)
      if (s["state"] == "failed")
        out["services_warning"] = fmt::format("service {} has failed ({}): read its trace, fix it, then "
                                              "service_restart {{\"sandbox_id\": \"{}\", \"name\": \"{}\"}}",
                                              s["name"].get<std::string>(), s.value("error", "it ended"), sandbox_id,
                                              s["name"].get<std::string>());
    out["services"] = std::move(svc);
  }
  if (!r->peak_memory_source.empty()) out["peak_memory_source"] = r->peak_memory_source;
  if (r->out.truncated || r->err.truncated)
    out["how_to_page"] = fmt::format("process_output {{\"run_id\": \"{}\", \"stream\": \"stdout\", \"offset\": 0}} "
                                     "reads the full output (kept up to output_bytes)",
                                     r->run_id);
  if (!r->warning.empty()) out["warning"] = r->warning;
  return ToolOutput{std::move(out)};
}

Result<ToolOutput> sandbox_list(CallContext& ctx, sbx::SandboxManager& m, const json& args) {
  std::string ws_id;
  if (args.contains("workspace") || ctx.session->current()) {
    auto ws = ctx.session->workspace_for(args);
    if (!ws) return std::unexpected(ws.error());
    ws_id = (*ws)->id;
  }
  json list = m.list(ctx.session->principal(), ws_id);
  return ToolOutput{json{{"sandboxes", std::move(list)}}};
}

Result<ToolOutput> sandbox_destroy(CallContext& ctx, sbx::SandboxManager& m, services::ServiceHost* services,
                                   const json& args) {
  const std::string id = args.at("sandbox_id").get<std::string>();
  // A clean shutdown first, so a postgres cluster needs no crash recovery when it starts next.
  if (services) services->stop_all(ctx.session->principal(), id);
  auto r = m.destroy(ctx.session->principal(), id);
  if (!r) return std::unexpected(r.error());
  json cleanup = {{"processes_killed", r->processes_killed},
                  {"namespaces_gone", r->namespaces_gone},
                  {"cgroups_removed", r->cgroups_removed},
                  {"temp_dirs_removed", r->temp_dirs_removed},
                  {"leftovers", r->leftovers},
                  {"duration_ms", r->duration_ms}};
  return ToolOutput{json{{"sandbox_id", r->sandbox_id}, {"cleanup", std::move(cleanup)}}};
}

}  // namespace

void register_sandbox_tools(ToolRegistry& registry, sbx::SandboxManager& m, RunTracer* tracer,
                            services::ServiceHost* services) {
  registry.add("sandbox_create", redacting(m, [services](CallContext& ctx, sbx::SandboxManager& mm, const json& args) {
                 return sandbox_create(ctx, mm, services, args);
               }));
  registry.add("sandbox_exec", redacting(m, [tracer, services](CallContext& ctx, sbx::SandboxManager& mm, const json& args) {
                 return sandbox_exec(ctx, mm, tracer, services, args);
               }));
  // A secret the policy names and Kiln lacks is asked of the person first (tools/secret_prompt.h).
  registry.set_preflight("sandbox_create", secret_preflight(true));
  registry.set_preflight("sandbox_exec", secret_preflight(true));
  registry.add("sandbox_list", redacting(m, sandbox_list));
  registry.add("sandbox_destroy", redacting(m, [services](CallContext& ctx, sbx::SandboxManager& mm, const json& args) {
                 return sandbox_destroy(ctx, mm, services, args);
               }));
  register_process_tools(registry, m);
  if (services) register_service_tools(registry, m, *services);
}

}  // namespace kiln::server
