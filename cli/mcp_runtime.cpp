// The composition of one MCP server process (see mcp_runtime.h). Everything here lives until the
// process exits: sessions hold references into it and transports leave with _Exit.
#include "cli/mcp_runtime.h"

#include "cli/blob_owners.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include <spdlog/spdlog.h>

#include "artifacts/artifact_store.h"
#include "cli/process_setup.h"
#include "mcp/resource_provider.h"
#include "mcp/server_shared.h"
#include "mcp/tool_registry.h"
#include "runs/run_tracing.h"
#include "runs/trace_hub.h"
#include "sandbox/manager.h"
#include "services/service_host.h"
#include "tools/publish.h"
#include "tools/tools.h"
#include "tools/trace_resources.h"
#include "traces/trace_store.h"
#include "workspace/state_store.h"

namespace kiln::cli {

namespace {

using server::ResourceProvider;
using server::RunTracer;
using server::ServerContext;
using server::ToolRegistry;
using server::TraceHub;

void fill_registry(ToolRegistry& registry, sandbox::SandboxManager& sandboxes, RunTracer* tracer,
                   services::ServiceHost* services, artifacts::ArtifactStore* artifacts,
                   const std::string& network_allow_file) {
  server::register_workspace_tools(registry, &sandboxes, tracer ? &tracer->store() : nullptr, artifacts);
  server::register_file_tools(registry);
  server::register_search_tools(registry);
  server::register_sandbox_tools(registry, sandboxes, tracer, services);
  if (tracer) server::register_trace_tools(registry, *tracer, sandboxes, services);
  if (tracer && tracer->checkpoints()) server::register_checkpoint_tools(registry, *tracer->checkpoints());
  if (tracer && artifacts) {
    server::register_publish_tools(registry, *tracer, *artifacts, network_allow_file);
    server::register_app_tools(registry, *tracer, *artifacts);
  }
  registry.check_complete();
}

// Member order is construction order: the tracer needs the trace store, hub and sandboxes. The
// stores and the context exist from prepare_mcp_runtime on; the rest is made by open().
struct Runtime {
  McpRuntimeOptions options;
  std::unique_ptr<workspace::StateStore> store;
  std::unique_ptr<sandbox::SandboxManager> sandboxes;
  std::unique_ptr<traces::TraceStore> traces;
  TraceHub trace_hub;
  std::unique_ptr<RunTracer> tracer;
  std::unique_ptr<services::ServiceHost> service_host;
  std::unique_ptr<artifacts::ArtifactStore> artifacts;
  std::shared_ptr<workspace::CheckpointStore> checkpoints;
  ToolRegistry registry;
  ResourceProvider trace_family;
  std::unique_ptr<ServerContext> context;
  bool opened = false;

  Result<void> open();
};

Result<void> Runtime::open() {
  if (opened) return fail(Errc::internal, "the MCP runtime was opened twice");
  opened = true;
  if (auto r = store->open_database(); !r) return r;  // makes the state dir (0700)

  sandbox::ManagerOptions sandbox_options;
  sandbox_options.state_dir = options.state_dir;
  sandbox_options.helper_path = default_helper_path();
  sandbox_options.allow_unsandboxed = options.allow_unsandboxed;
  sandbox_options.idle_timeout = std::chrono::seconds(options.sandbox_idle_s);
  sandbox_options.ceilings = options.ceilings;
  sandboxes = std::make_unique<sandbox::SandboxManager>(sandbox_options);

  // Opening the trace store also marks runs of dead servers as interrupted.
  if (auto r = traces->open_database(); !r) return r;
  tracer = std::make_unique<RunTracer>(*traces, &trace_hub, sandboxes.get());
  service_host = std::make_unique<services::ServiceHost>(*sandboxes, tracer.get(), options.state_dir);

  auto owners = open_blob_owners(options.state_dir);
  if (!owners) return std::unexpected(owners.error());
  artifacts = std::move(owners->artifacts);
  checkpoints = std::move(owners->checkpoints);
  tracer->set_checkpoints(checkpoints.get());

  // Parsing and checking the tool schemas takes longer than opening the stores; do it meanwhile
  // (tools/list and tools/call wait for it).
  registry.populate_in_background([this, file = options.ceilings.network_allow_file](ToolRegistry& r) {
    fill_registry(r, *sandboxes, tracer.get(), service_host.get(), artifacts.get(), file);
  });
  return {};
}

}  // namespace

PendingMcpRuntime prepare_mcp_runtime(const McpRuntimeOptions& options) {
  // Never destroyed: handlers that ignored cancellation may still hold references at exit.
  static Runtime* rt = nullptr;
  if (rt) {
    std::fputs("kiln: the MCP runtime was prepared twice\n", stderr);
    std::abort();
  }
  rt = new Runtime;
  rt->options = options;
  rt->store = workspace::StateStore::unopened(options.state_dir);
  rt->traces = traces::TraceStore::unopened(options.state_dir);
  // Sessions watch the trace family from their start; it reads the trace store only when asked.
  rt->trace_family = trace_resources(*rt->traces, &rt->trace_hub);
  rt->context = std::make_unique<ServerContext>(ServerContext{*rt->store, rt->registry, {}});
  ServerContext& server = *rt->context;
  server.options.startup_workspace = options.startup_workspace;
  server.options.allow_unsandboxed = options.allow_unsandboxed;
  server.options.sandbox_idle_s = options.sandbox_idle_s;
  server.resources.push_back(&rt->trace_family);
  server.before_tool_call = [traces = rt->traces.get()](const std::string& principal) {
    traces->wait_finishes(&principal);
  };
  // Tasks are no requests, so the sessions' shutdown left them running: cancelled here, their runs
  // end as cancelled. Then up to a minute for the ends: the checkpoint after a run of a big
  // workspace may take that long, and a run whose end is not written by then reads as
  // interrupted at the next start, as a killed server's does.
  server.before_exit = [shared = server.shared, traces = rt->traces.get()] {
    if (!shared->tasks.cancel_all(std::chrono::seconds(5)))
      spdlog::warn("leaving with a cancelled task still running; its run will read as interrupted");
    if (!traces->wait_finishes_for(std::chrono::minutes(1)))
      spdlog::warn("leaving with the end of a run's trace still unwritten; it will read as interrupted");
  };
  return {server, [] { return rt->open(); }};
}

Result<ServerContext*> open_mcp_runtime(const McpRuntimeOptions& options) {
  auto pending = prepare_mcp_runtime(options);
  if (auto r = pending.open(); !r) return std::unexpected(r.error());
  return &pending.context;
}

}  // namespace kiln::cli
