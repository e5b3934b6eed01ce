// Every sandboxed run leaves a trace: this wires an ExecRequest so its output lands in the
// trace's folder and its record is finished (and subscribers told) when the run ends. Used by
// sandbox_exec, verify and `kiln run`.
#pragma once

#include <future>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "runs/trace_row_writer.h"
#include "sandbox/manager.h"
#include "sandbox/types.h"
#include "traces/trace_store.h"
#include "workspace/checkpoint_store.h"

namespace kiln::server {

class TraceHub;

// Who and under which policy: what the record says besides the command.
struct ExecTraceInfo {
  std::string kind = "exec";             // or "service": a service's own process
  std::string workspace_id;
  std::optional<std::string> parent_id;  // a verify step's verify
  std::string name;                      // check name of a verify step
  nlohmann::json client = nullptr;       // {name, version}
  std::string principal;                 // whom it ran for (TOOLS.md, principals)
  nlohmann::json policy = nullptr;       // from policy_json()
  // Set: checkpoints around the run (kiln.json checkpoints.auto, on by default) record what it
  // changed in this workspace as the trace's `changes`. A background run's when it ends.
  std::shared_ptr<const workspace::Root> checkpoint_root;
  std::string checkpoint_trigger = "exec";
};

// network, isolation, limits, env names and secret names (never values).
nlohmann::json policy_json(const sandbox::SandboxPolicy& p);

// The status a finished exec gets in its trace: pass (exit 0), error (could not be set up or
// was interrupted), fail (everything else).
std::string trace_status_of(const sandbox::ExecResult& r);
traces::TraceFinish trace_finish_of(const sandbox::ExecResult& r, const nlohmann::json& start_policy);

class RunTracer {
 public:
  // Installs the manager's secret redactor as the store's scrubber, so every string any trace
  // keeps (command, cwd, names, errors, results) is redacted, not only run output.
  RunTracer(traces::TraceStore& store, TraceHub* hub, sandbox::SandboxManager* manager);

  traces::TraceStore& store() { return store_; }
  TraceHub* hub() { return hub_; }

  // Records `req` as a running exec trace and points its output and completion at the trace.
  // Returns the trace id. With `started` (and no parent), the record's row is written on the
  // writer thread while the caller prepares the run: `req.before_start` waits for it, so the
  // command still starts only once its trace exists, and `*started` says how the write went
  // (wait on it before ending the trace of a run that never started).
  Result<std::string> attach(sandbox::ExecRequest& req, const ExecTraceInfo& info,
                             std::shared_future<Result<void>>* started = nullptr);

  // Tells subscribers (resources/subscribe on kiln://trace/ID) that the record changed.
  void changed(const std::string& trace_id) const;

  // Where automatic checkpoints go (null: none are taken).
  void set_checkpoints(workspace::CheckpointStore* store) { checkpoints_ = store; }
  workspace::CheckpointStore* checkpoints() const { return checkpoints_; }
  // The checkpoint a run starts from, for `trace_id`; empty when none could be taken (the run
  // goes on: a failed checkpoint never stops one).
  std::string checkpoint_before(const std::shared_ptr<const workspace::Root>& root, const std::string& workspace_id,
                                const std::string& principal, const std::string& trigger, const std::string& trace_id);
  // The checkpoint after, and what changed since `before` (the trace's `changes`).
  nlohmann::json changes_since(const std::shared_ptr<const workspace::Root>& root, const std::string& workspace_id,
                               const std::string& principal, const std::string& trigger, const std::string& trace_id,
                               const std::string& before);
  // changes_since, recorded as the trace's changes.
  void record_changes(const std::shared_ptr<const workspace::Root>& root, const std::string& workspace_id,
                      const std::string& principal, const std::string& trigger, const std::string& trace_id,
                      const std::string& before);

 private:
  traces::TraceStore& store_;
  TraceHub* hub_;
  sandbox::SandboxManager* manager_;
  workspace::CheckpointStore* checkpoints_ = nullptr;
  TraceRowWriter writer_{store_};
};

std::string trace_uri(const std::string& trace_id);

}  // namespace kiln::server
