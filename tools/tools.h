// Registration of every tool family; each lives in its own file of tools/.
#pragma once

namespace kiln::sandbox { class SandboxManager; }
namespace kiln::traces { class TraceStore; }
namespace kiln::artifacts { class ArtifactStore; }
namespace kiln::services { class ServiceHost; }
namespace kiln::workspace { class CheckpointStore; }

namespace kiln::server {

class ToolRegistry;
class RunTracer;

// workspace_open, workspace_list, workspace_info (which lists live sandboxes, traces and
// artifacts when given their stores)
void register_workspace_tools(ToolRegistry& registry, sandbox::SandboxManager* sandboxes = nullptr,
                              traces::TraceStore* traces = nullptr, artifacts::ArtifactStore* artifacts = nullptr);
void register_file_tools(ToolRegistry& registry);       // file_read, file_write, file_edit, file_move, file_delete
void register_search_tools(ToolRegistry& registry);     // file_list, file_search
// sandbox_create, sandbox_exec, sandbox_list, sandbox_destroy, process_output, process_input, process_kill,
// and with `services` service_list and service_restart (tools/services.cpp)
void register_sandbox_tools(ToolRegistry& registry, sandbox::SandboxManager& sandboxes, RunTracer* tracer = nullptr,
                            services::ServiceHost* services = nullptr);

// trace_list, trace_get, trace_output, verify (tools/traces.cpp, tools/verify.cpp)
void register_trace_tools(ToolRegistry& registry, RunTracer& tracer, sandbox::SandboxManager& sandboxes,
                          services::ServiceHost* services = nullptr);

// app_status, app_restart, schedule_run, app_export (tools/apps.cpp; the app helpers publish and
// unpublish share are in tools/apps.h).
void register_app_tools(ToolRegistry& registry, RunTracer& tracer, artifacts::ArtifactStore& store);

// checkpoint_create, checkpoint_list, checkpoint_diff, checkpoint_restore (tools/checkpoints.cpp)
void register_checkpoint_tools(ToolRegistry& registry, workspace::CheckpointStore& store);

}  // namespace kiln::server
