// `verify`: the workspace's kiln.json checks run in order in one sandbox, each a child trace of
// the verify trace, test reports parsed, with the services they name (a fresh database per run). Shared by the verify tool and `kiln verify`.
#pragma once

#include <functional>
#include <memory>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "sandbox/manager.h"
#include "workspace/root.h"

namespace kiln::services { class ServiceHost; }

namespace kiln::server {

class RunTracer;

struct VerifyTarget {
  std::string workspace_id;
  std::string workspace_name;
  std::shared_ptr<const workspace::Root> root;
  std::string state_dir;  // refused as a workspace (the sandbox must never see Kiln's state)
};

struct VerifyRequest {
  std::vector<std::string> only;   // check names; empty: all
  nlohmann::json client = nullptr;  // {name, version} for the traces
  std::string principal;            // whom it runs for: owner of its sandbox, recorded in its traces
  std::stop_token stop;
  // Called before and after each check: done out of total, and a line for people.
  std::function<void(double done, double total, const std::string& message)> progress;
  // Each chunk of a check's output as it arrives (redacted), for a terminal.
  std::function<void(const std::string& check, bool is_stderr, std::string_view chunk)> live_output;
  // Starts the services the checks name (kiln.json "services"); without it such checks are an error.
  services::ServiceHost* services = nullptr;
};

// The verify tool's result: {status, workspace, trace_id, trace_uri, duration_ms, checks, summary}.
// Configuration mistakes (no kiln.json checks, an unknown check name, a broken kiln.json) are
// errors; anything that happens while checks run is in the result.
Result<nlohmann::json> run_verify(RunTracer& tracer, sandbox::SandboxManager& sandboxes, const VerifyTarget& target,
                                  const VerifyRequest& request);

}  // namespace kiln::server
