// The verify engine. One session sandbox for all checks (so a build step's output is there for
// the test step), each check an exec trace under the verify trace; reports are read through the
// workspace root's confined open, so a report path that is a symlink out of the workspace is
// refused rather than copied into a trace.
#include "verify/verify_runner.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <set>

#include <fmt/format.h>

#include "core/fd_io.h"
#include "sandbox/policy.h"
#include "workspace/kiln_config.h"
#include "runs/run_tracing.h"
#include "services/service_host.h"
#include "traces/test_report.h"
#include "traces/trace_store.h"

namespace kiln::server {

namespace sbx = kiln::sandbox;
using nlohmann::json;

namespace {

constexpr std::size_t kMaxReportBytes = 64u << 20;

struct CheckOutcome {
  std::string status;  // pass | fail | error | skipped | cancelled
  json j;
};

// The report the check wrote during this run, parsed. A file older than the run is someone
// else's (an earlier run's) and does not count.
Result<traces::TestReport> read_report(const workspace::Root& root, const ReportConfig& rep,
                                       const std::timespec& started) {
  auto fd = root.open(rep.path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (!fd) {
    if (fd.error().code == Errc::not_found)
      return fail(Errc::not_found, fmt::format("report {} was not written (no such file)", rep.path));
    return fail(fd.error().code, fmt::format("report {}: {}", rep.path, fd.error().message));
  }
  struct stat st {};
  if (::fstat(fd->get(), &st) != 0 || !S_ISREG(st.st_mode))
    return fail(Errc::invalid_argument, fmt::format("report {} is not a regular file", rep.path));
  // File times come from a coarse clock: allow it to lag the run's start a little.
  const double mtime = double(st.st_mtim.tv_sec) + st.st_mtim.tv_nsec / 1e9;
  const double start = double(started.tv_sec) + started.tv_nsec / 1e9;
  if (mtime < start - 0.05)
    return fail(Errc::not_found, fmt::format("report {} was not written by this run (it is older than the run)", rep.path));
  if (std::size_t(st.st_size) > kMaxReportBytes)
    return fail(Errc::too_large, fmt::format("report {} is {} bytes; reports over {} MiB are not read", rep.path,
                                             st.st_size, kMaxReportBytes >> 20));
  std::string data(std::size_t(st.st_size), '\0');
  ssize_t got = read_full(fd->get(), data.data(), data.size());
  if (got < 0) return fail(Errc::io, fmt::format("cannot read report {}: {}", rep.path, std::strerror(errno)));
  data.resize(std::size_t(got));
  auto parsed = traces::parse_report(rep.format, data);
  if (!parsed) return fail(Errc::invalid_argument, fmt::format("report {}: {}", rep.path, parsed.error().message));
  return parsed;
}

std::string describe_tests(const json& tests) {
  if (!tests.is_object()) return "";
  return fmt::format(" ({} passed, {} failed, {} skipped)", tests.value("passed", 0), tests.value("failed", 0),
                     tests.value("skipped", 0));
}

json check_json(const std::string& name, const std::string& status) {
  return json{{"name", name},     {"status", status},        {"exit_code", nullptr}, {"stop_reason", nullptr},
              {"duration_ms", nullptr}, {"tests", nullptr}, {"trace_id", nullptr}};
}

}  // namespace

Result<json> run_verify(RunTracer& tracer, sbx::SandboxManager& m, const VerifyTarget& target,
                        const VerifyRequest& request) {
  const auto t0 = std::chrono::steady_clock::now();
  const workspace::Root& root = *target.root;
  LoadedConfig cfg = load_config(root);
  if (!cfg.error.empty()) return fail(Errc::invalid_argument, cfg.error + "; fix kiln.json and run verify again");
  if (!cfg.typed || cfg.typed->checks.empty())
    return fail(Errc::invalid_argument,
                fmt::format("no checks to run: {} has no \"verify\" list in kiln.json. Add one, e.g. {{\"verify\": "
                            "[{{\"name\": \"test\", \"run\": \"make test\"}}]}}",
                            target.workspace_name));
  const KilnConfig& config = *cfg.typed;

  std::vector<const CheckConfig*> checks;
  if (request.only.empty()) {
    for (const auto& c : config.checks) checks.push_back(&c);
  } else {
    std::set<std::string> wanted(request.only.begin(), request.only.end());
    std::string names;
    for (const auto& c : config.checks) names += (names.empty() ? "" : ", ") + c.name;
    for (const auto& w : wanted) {
      bool found = false;
      for (const auto& c : config.checks) found = found || c.name == w;
      if (!found) return fail(Errc::invalid_argument, fmt::format("no check named '{}' in kiln.json; its checks are: {}", w, names));
    }
    for (const auto& c : config.checks)
      if (wanted.contains(c.name)) checks.push_back(&c);
  }

  if (auto ok = sbx::check_workspace_root(root.path(), target.state_dir); !ok) return std::unexpected(ok.error());
  sbx::PolicyInput in;
  in.config_sandbox = config.sandbox;
  in.workspace_root = root.path();
  in.workspace_id = target.workspace_id;
  auto policy = sbx::make_policy(in);
  if (!policy) return std::unexpected(policy.error());
  policy->owner = request.principal;
  if (auto ok = m.finalize_policy(*policy); !ok) return std::unexpected(ok.error());
  // The services any chosen check names, in kiln.json's order, started once for the whole run.
  std::vector<std::string> service_names;
  for (const auto& s : config.services)
    for (const auto* c : checks)
      if (std::find(c->services.begin(), c->services.end(), s.name) != c->services.end()) {
        service_names.push_back(s.name);
        break;
      }
  json policy_j = policy_json(*policy);
  if (!service_names.empty()) policy_j["services"] = service_names;

  std::string names;
  for (const auto* c : checks) names += (names.empty() ? "" : ", ") + c->name;
  traces::TraceStart vs;
  vs.kind = "verify";
  vs.workspace_id = target.workspace_id;
  vs.client = request.client;
  vs.principal = request.principal;
  vs.command = "verify: " + names;
  vs.cwd = root.path();
  vs.policy = policy_j;
  auto vrec = tracer.store().start(vs);
  if (!vrec) return std::unexpected(vrec.error());
  const std::string verify_id = vrec->id;
  tracer.changed(verify_id);
  // What the whole verify changed (a formatter, generated files), as one before/after pair.
  std::string checkpoint_before;
  if (tracer.checkpoints() && config.checkpoints_auto)
    checkpoint_before = tracer.checkpoint_before(target.root, target.workspace_id, request.principal, "verify", verify_id);

  const double total = double(checks.size());
  auto progress = [&](double done, const std::string& msg) {
    if (request.progress) request.progress(done, total, msg);
  };

  json results = json::array();
  json totals = {{"passed", 0}, {"failed", 0}, {"skipped", 0}, {"failures", json::array()}};
  bool have_tests = false, stop_rest = false, cancelled = false;
  std::string overall = "pass";
  std::string sandbox_error;
  std::shared_ptr<services::ServiceHost::Prepared> prepared;
  if (!service_names.empty()) {
    if (!request.services) {
      sandbox_error = "this server cannot run services";
    } else {
      services::ServiceRequest sr;
      sr.config = &config;
      sr.names = service_names;
      sr.use = services::DataUse::verify;
      sr.workspace_id = target.workspace_id;
      sr.workspace_root = root.path();
      sr.owner = request.principal;
      sr.client = request.client;
      sr.parent_trace = verify_id;
      auto p = request.services->prepare(sr, *policy, request.stop);
      if (!p) sandbox_error = p.error().message;
      else prepared = std::move(*p);
    }
  }
  Result<sbx::SandboxInfo> info = fail(Errc::internal, "not created");
  json service_status = json::array();
  if (sandbox_error.empty()) {
    info = m.create(*policy, request.stop);
    if (!info) sandbox_error = info.error().message;
  }
  if (info && prepared) {
    auto started = request.services->start(prepared, info->sandbox_id, request.stop);
    if (!started) sandbox_error = started.error().message;
    for (const auto& s : request.services->list(request.principal, info->sandbox_id))
      service_status.push_back(services::to_json(s));
  }
  prepared.reset();  // an unstarted preparation lets its data locks go here

  for (std::size_t i = 0; i < checks.size(); ++i) {
    const CheckConfig& c = *checks[i];
    if (!sandbox_error.empty()) {
      json j = check_json(c.name, "error");
      j["error"] = (service_names.empty() || !info ? "the sandbox could not be created: "
                                                   : "the services could not be started: ") + sandbox_error;
      results.push_back(std::move(j));
      overall = "error";
      continue;
    }
    if (request.stop.stop_requested()) cancelled = true;
    if (cancelled || stop_rest) {
      results.push_back(check_json(c.name, cancelled ? "cancelled" : "skipped"));
      continue;
    }
    progress(double(i) + 0.5, fmt::format("check {} ({}/{}): {}", c.name, i + 1, checks.size(), c.display));

    sbx::ExecRequest req;
    req.owner = request.principal;
    req.argv = c.argv;
    req.display_command = c.display;
    req.cwd = c.cwd.empty() ? root.path() : (std::filesystem::path(root.path()) / c.cwd).lexically_normal().string();
    req.env = c.env;
    if (c.timeout_s) req.timeout_s = *c.timeout_s;
    req.tail_bytes = 4096;
    if (request.live_output) {
      auto live = request.live_output;
      std::string name = c.name;
      req.live_output = [live, name](bool is_stderr, std::string_view chunk) { live(name, is_stderr, chunk); };
    }
    ExecTraceInfo ti;
    ti.workspace_id = target.workspace_id;
    ti.parent_id = verify_id;
    ti.name = c.name;
    ti.client = request.client;
    ti.principal = request.principal;
    ti.policy = policy_j;
    for (const auto& [k, v] : c.env) ti.policy["env_names"].push_back(k);
    auto child_id = tracer.attach(req, ti);
    json j = check_json(c.name, "error");
    if (!child_id) {
      j["error"] = "could not record the check's trace: " + child_id.error().message;
      results.push_back(std::move(j));
      overall = "error";
      stop_rest = !c.on_failure_continue;
      continue;
    }
    j["trace_id"] = *child_id;
    std::timespec started{};
    std::timespec_get(&started, TIME_UTC);
    auto r = m.exec(info->sandbox_id, nullptr, std::move(req), request.stop);
    std::string status;
    std::string error;
    json tests = nullptr;
    if (!r) {
      status = "error";
      error = m.redact(r.error().message);
      traces::TraceFinish f;
      f.status = "error";
      f.stop_reason = "setup_failed";
      f.error = error;
      (void)tracer.store().finish(*child_id, f);  // conflict: the run already recorded its end
    } else {
      j["exit_code"] = r->exit_code ? json(*r->exit_code) : json(nullptr);
      j["stop_reason"] = sbx::to_string(r->stop_reason);
      j["duration_ms"] = r->duration_ms;
      if (r->stop_reason == sbx::StopReason::cancelled) cancelled = true;
      const bool ran_ok = r->stop_reason == sbx::StopReason::exit && r->exit_code == 0;
      status = r->stop_reason == sbx::StopReason::setup_failed ? "error" : ran_ok ? "pass" : "fail";
      if (cancelled) status = "cancelled";
      if (c.report && status != "error" && status != "cancelled") {
        auto rep = read_report(root, *c.report, started);
        if (rep) {
          // Runners print absolute paths; inside the workspace a relative one is what an agent opens.
          for (auto& f : rep->failures)
            if (f.file.starts_with(root.path() + "/")) f.file = f.file.substr(root.path().size() + 1);
          tests = traces::to_json(*rep);
          if (rep->failed > 0) status = "fail";
        } else if (ran_ok || rep.error().code != Errc::not_found) {
          // A check that passed must leave its report; a broken report is never a pass.
          status = "error";
          error = rep.error().message;
        } else {
          error = rep.error().message;  // the check failed before writing it: the failure says enough
        }
      }
    }
    const std::string trace_status = status == "cancelled" ? "fail" : status;
    (void)tracer.store().set_tests(*child_id, tests, trace_status, error);
    tracer.changed(*child_id);
    j["status"] = status;
    j["tests"] = tests;
    if (!error.empty()) j["error"] = error;
    if (tests.is_object()) {
      have_tests = true;
      for (const char* k : {"passed", "failed", "skipped"}) totals[k] = totals[k].get<std::int64_t>() + tests.value(k, 0);
      for (const auto& f : tests.value("failures", json::array()))
        if (totals["failures"].size() < 200) totals["failures"].push_back(f);
    }
    if (status == "error") overall = "error";
    else if (status != "pass" && overall == "pass") overall = "fail";
    if (status != "pass" && !c.on_failure_continue) stop_rest = true;
    progress(double(i + 1), fmt::format("check {}: {}{}", c.name, status, describe_tests(tests)));
    results.push_back(std::move(j));
    (void)tracer.store().update_result(verify_id, json{{"checks", results}});
    tracer.changed(verify_id);
  }
  if (cancelled && overall == "pass") overall = "fail";

  json cleanup = nullptr;
  if (info) {
    if (request.services && !service_names.empty()) request.services->stop_all(request.principal, info->sandbox_id);
    if (auto cr = m.destroy(request.principal, info->sandbox_id)) {
      cleanup = {{"processes_killed", cr->processes_killed}, {"namespaces_gone", cr->namespaces_gone},
                 {"cgroups_removed", cr->cgroups_removed},   {"temp_dirs_removed", cr->temp_dirs_removed},
                 {"leftovers", cr->leftovers}};
    }
  }
  const auto duration_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
  std::size_t n_pass = 0;
  for (const auto& c : results) n_pass += c["status"] == "pass";
  std::string summary = fmt::format("verify {}: {} of {} checks passed{}", overall, n_pass, results.size(),
                                    have_tests ? describe_tests(totals) : "");
  if (!sandbox_error.empty())
    summary += (service_names.empty() || !info ? "; the sandbox could not be created: "
                                               : "; the services could not be started: ") + sandbox_error;

  traces::TraceFinish vf;
  vf.status = overall;
  vf.stop_reason = cancelled ? "cancelled" : "exit";
  vf.cleanup = cleanup;
  vf.tests = have_tests ? totals : json(nullptr);
  vf.result = {{"status", overall}, {"checks", results}, {"summary", summary}};
  if (!service_names.empty()) vf.result["services"] = service_status;
  vf.error = sandbox_error.empty() ? "" : m.redact(sandbox_error);
  vf.duration_ms = duration_ms;
  if (!checkpoint_before.empty())
    tracer.record_changes(target.root, target.workspace_id, request.principal, "verify", verify_id, checkpoint_before);
  (void)tracer.store().finish(verify_id, vf);
  tracer.changed(verify_id);

  json out = {{"status", overall},          {"workspace", target.workspace_id}, {"trace_id", verify_id},
              {"trace_uri", trace_uri(verify_id)}, {"duration_ms", duration_ms}, {"checks", results},
              {"summary", summary}};
  if (!service_names.empty()) out["services"] = service_status;
  if (cancelled) out["cancelled"] = true;
  m.redact_json(out);
  return out;
}

}  // namespace kiln::server
