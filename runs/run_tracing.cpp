// Exec traces: start record, output folder, live "updated" notices (throttled) and the final
// record, all redacted by the sandbox manager (the store's scrubber) before they reach the store.
#include "runs/run_tracing.h"

#include <atomic>
#include <chrono>
#include <exception>
#include <memory>

#include <spdlog/spdlog.h>

#include "runs/trace_hub.h"

namespace kiln::server {

namespace sbx = kiln::sandbox;
using nlohmann::json;

namespace {

json limits_json(const sbx::Limits& l) {
  json j = json::object();
  if (l.wall_s) j["wall_s"] = *l.wall_s;
  if (l.cpu_s) j["cpu_s"] = *l.cpu_s;
  if (l.memory_mb) j["memory_mb"] = *l.memory_mb;
  if (l.pids) j["pids"] = *l.pids;
  if (l.output_bytes) j["output_bytes"] = *l.output_bytes;
  if (l.file_size_mb) j["file_size_mb"] = *l.file_size_mb;
  if (l.disk_mb) j["disk_mb"] = *l.disk_mb;
  return j;
}

}  // namespace

namespace {

// An automatic checkpoint of a run: equal to the workspace's latest, that one is returned.
workspace::CheckpointRequest around_run(const std::shared_ptr<const workspace::Root>& root,
                                        const std::string& workspace_id, const std::string& principal,
                                        const std::string& trigger, const std::string& trace_id, const char* when) {
  workspace::CheckpointRequest q;
  q.root = root.get();
  q.workspace_id = workspace_id;
  q.principal = principal;
  q.trigger = trigger;
  q.trace_id = trace_id;
  q.label = fmt::format("{} {}", when, trace_id);
  q.reuse_latest = true;
  return q;
}

}  // namespace

std::string RunTracer::checkpoint_before(const std::shared_ptr<const workspace::Root>& root,
                                         const std::string& workspace_id, const std::string& principal,
                                         const std::string& trigger, const std::string& trace_id) {
  auto c = checkpoints_->create(around_run(root, workspace_id, principal, trigger, trace_id, "before"));
  if (!c) {
    spdlog::warn("trace {}: no checkpoint before the run: {}", trace_id, c.error().message);
    (void)store_.set_changes(trace_id, json{{"error", c.error().message}});
    return {};
  }
  return c->id;
}

json RunTracer::changes_since(const std::shared_ptr<const workspace::Root>& root, const std::string& workspace_id,
                             const std::string& principal, const std::string& trigger, const std::string& trace_id,
                             const std::string& before) {
  auto after = checkpoints_->create(around_run(root, workspace_id, principal, trigger, trace_id, "after"));
  json changes;
  if (!after) {
    changes = {{"error", after.error().message}, {"checkpoint_before", before}};
  } else if (after->id == before) {  // nothing changed: no need to compare
    workspace::RunChanges none;
    none.checkpoint_before = none.checkpoint_after = before;
    changes = none.to_json();
  } else if (auto c = checkpoints_->changes(before, after->id)) {
    changes = c->to_json();
  } else {
    changes = {{"error", c.error().message}, {"checkpoint_before", before}, {"checkpoint_after", after->id}};
  }
  return changes;
}

void RunTracer::record_changes(const std::shared_ptr<const workspace::Root>& root, const std::string& workspace_id,
                               const std::string& principal, const std::string& trigger, const std::string& trace_id,
                               const std::string& before) {
  json changes = changes_since(root, workspace_id, principal, trigger, trace_id, before);
  if (auto ok = store_.set_changes(trace_id, changes); !ok)
    spdlog::warn("trace {}: could not record what the run changed: {}", trace_id, ok.error().message);
}

std::string trace_uri(const std::string& trace_id) { return "kiln://trace/" + trace_id; }

json policy_json(const sbx::SandboxPolicy& p) {
  json env = json::array();
  for (const auto& [k, v] : p.env) env.push_back(k);
  json network = p.egress ? json(p.egress->to_json()) : json(sbx::to_string(p.network));
  return json{{"network", network},
              {"isolation", p.isolation == sbx::Isolation::none ? "none" : "strict"},
              {"limits", limits_json(p.limits)},
              {"env_names", env},
              {"secret_names", p.secrets}};
}

std::string trace_status_of(const sbx::ExecResult& r) {
  if (r.stop_reason == sbx::StopReason::setup_failed || r.stop_reason == sbx::StopReason::interrupted) return "error";
  if (r.stop_reason == sbx::StopReason::exit && r.exit_code == 0) return "pass";
  return "fail";
}

traces::TraceFinish trace_finish_of(const sbx::ExecResult& r, const json& start_policy) {
  traces::TraceFinish f;
  f.status = trace_status_of(r);
  f.exit_code = r.exit_code;
  if (r.signal) f.signal = r.signal;
  f.stop_reason = sbx::to_string(r.stop_reason);
  f.resources = {{"peak_memory_bytes", r.peak_memory_bytes ? json(*r.peak_memory_bytes) : json(nullptr)},
                 {"peak_memory_source", r.peak_memory_source},
                 {"user_ms", r.user_ms},
                 {"sys_ms", r.sys_ms}};
  f.output = {{"stdout_bytes", r.out.total_bytes},
              {"stderr_bytes", r.err.total_bytes},
              {"dropped_bytes", r.out.dropped_bytes + r.err.dropped_bytes},
              {"truncated", r.out.dropped_bytes + r.err.dropped_bytes > 0}};
  f.result = {{"run_id", r.run_id},
              {"sandbox_id", r.sandbox_id},
              {"fresh_sandbox", r.fresh_sandbox},
              {"limits_hit", r.limits_hit}};
  if (!r.warning.empty()) f.result["warning"] = r.warning;
  if (!r.network_log.is_null()) {
    f.network_log = r.network_log;
    f.result["network"] = r.network_summary;
  }
  if (!r.output_error.empty()) {
    f.status = "error";
    f.error = r.output_error;
  }
  json policy = start_policy.is_object() ? start_policy : json::object();
  if (!r.isolation.is_null()) policy["isolation_report"] = r.isolation;
  f.policy = std::move(policy);
  f.duration_ms = std::int64_t(r.duration_precise_ms + 0.5);
  return f;
}

RunTracer::RunTracer(traces::TraceStore& store, TraceHub* hub, sbx::SandboxManager* manager)
    : store_(store), hub_(hub), manager_(manager) {
  if (manager_) store_.set_scrubber([m = manager_](std::string_view text) { return m->redact(text); });
}

void RunTracer::changed(const std::string& trace_id) const {
  if (hub_) hub_->changed(trace_id);
}

Result<std::string> RunTracer::attach(sbx::ExecRequest& req, const ExecTraceInfo& info,
                                      std::shared_future<Result<void>>* started) {
  traces::TraceStart s;
  s.kind = info.kind;
  s.workspace_id = info.workspace_id;
  s.parent_id = info.parent_id;
  s.name = info.name;
  s.client = info.client;
  s.principal = info.principal;
  s.command = manager_ ? manager_->redact(req.display_command) : req.display_command;
  s.cwd = req.cwd;
  s.policy = info.policy;
  const bool beside = started && !s.parent_id;
  auto rec = beside ? store_.prepare_start(s) : store_.start(s);
  if (!rec) return std::unexpected(rec.error());
  const std::string id = rec->id;
  auto dir = store_.output_dir(id);
  if (!dir) return std::unexpected(dir.error());  // before the row is queued: no record left running
  req.run_dir = *dir;
  if (beside) {
    *started = writer_.write(std::move(*rec));
    req.before_start = [row = *started]() { return row.get(); };
  }

  // Output growth is announced at most every 250 ms; the end always is.
  auto last = std::make_shared<std::atomic<std::int64_t>>(0);
  auto previous_live = std::move(req.live_output);
  RunTracer* self = this;
  req.live_output = [self, id, last, previous_live](bool is_stderr, std::string_view chunk) {
    if (previous_live) previous_live(is_stderr, chunk);
    auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
                   std::chrono::steady_clock::now().time_since_epoch()).count();
    auto before = last->load();
    if (now - before >= 250 && last->compare_exchange_strong(before, now)) self->changed(id);
  };
  auto previous_done = std::move(req.on_finished);
  json policy = info.policy;
  std::string before;
  if (checkpoints_ && info.checkpoint_root) {
    store_.wait_finishes(&info.principal);  // an earlier run's checkpoint after it comes first
    before = checkpoint_before(info.checkpoint_root, info.workspace_id, info.principal, info.checkpoint_trigger, id);
  }
  auto cp_root = before.empty() ? nullptr : info.checkpoint_root;
  auto end = [self, id, policy, before, cp_root, ws = info.workspace_id, who = info.principal,
              trigger = info.checkpoint_trigger](const sbx::ExecResult& r) {
    // In the same update that ends the record, so whoever reads the ended trace sees its changes.
    auto finish = trace_finish_of(r, policy);
    if (cp_root) finish.changes = self->changes_since(cp_root, ws, who, trigger, id, before);
    if (auto done = self->store_.finish(id, finish); !done)
      spdlog::warn("trace {}: could not record the end of the run: {}", id, done.error().message);
    self->changed(id);
  };
  // A sandbox_exec's end (the checkpoint after it and the record's UPDATE, a quarter of a
  // millisecond) is written once its caller has the result, on the manager's thread and before
  // the run's clean-up there (another thread for it only made three busy threads on two cores
  // when the answer goes out). The store holds every read of the record until then, and the
  // server lets no tool call start before it is written (ServerContext::before_tool_call), so
  // the next call never sees the run still running nor the workspace before the checkpoint
  // after it.
  if (beside) {
    auto result = std::make_shared<std::optional<sbx::ExecResult>>();
    req.on_finished = [self, id, result, previous_done, who = info.principal](const sbx::ExecResult& r) {
      *result = r;
      if (previous_done) previous_done(r);
      // Last: from here the manager's next steps are its caller's wake-up and after_result,
      // which writes or forgets this end; nothing between them throws.
      self->store_.expect_finish(id, who);
    };
    req.after_result = [self, id, end, result] {
      try {
        if (*result) end(**result);
      } catch (const std::exception& e) {
        spdlog::warn("trace {}: could not record the end of the run: {}", id, e.what());
      }
      self->store_.forget_finish(id);  // if end() never reached finish(), nobody waits for it
    };
  } else {
    req.on_finished = [end, previous_done](const sbx::ExecResult& r) {
      end(r);
      if (previous_done) previous_done(r);
    };
  }
  req.on_sandbox_cleanup = [self, id](const sbx::CleanupReport& c) {
    json j = {{"sandbox_id", c.sandbox_id},
              {"processes_killed", c.processes_killed},
              {"namespaces_gone", c.namespaces_gone},
              {"cgroups_removed", c.cgroups_removed},
              {"temp_dirs_removed", c.temp_dirs_removed},
              {"leftovers", c.leftovers}};
    if (auto ok = self->store_.set_cleanup(id, j); !ok)
      spdlog::warn("trace {}: could not record the sandbox clean-up: {}", id, ok.error().message);
    self->changed(id);
  };
  return id;
}

}  // namespace kiln::server
