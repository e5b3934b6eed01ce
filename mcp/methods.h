// The MCP request methods a session serves besides the lifecycle ones, each family in its own file
// (methods_tools.cpp, methods_resources.cpp with completion, methods_prompts.cpp); session.cpp's
// method table maps names to them. They return a result object or a JSON-RPC error; the session
// sends exactly one of the two.
#pragma once

#include <expected>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "mcp/call_context.h"
#include "mcp/method_result.h"
#include "mcp/session.h"
#include "mcp/session_state.h"

namespace kiln::server {

// What a method handler may use besides its params.
struct MethodEnv {
  ServerContext& server;
  SessionState& state;
  CallContext& ctx;
  // The request's era: a modern (2026-07-28) request is served statelessly, with the capabilities
  // its own _meta declares; a legacy one with those its session's initialize declared.
  bool modern = false;
  const nlohmann::json& client_capabilities;
  // Keeps `state` alive for work that outlives the request (a task).
  std::shared_ptr<SessionState> state_owner;
  // Records a resources/subscribe (true) or unsubscribe (false) for `uri`.
  std::function<void(const std::string& uri, bool subscribe)> set_subscription;
  // Tells subscribers that the resource at `uri` changed.
  std::function<void(const std::string& uri)> resource_updated;
};

MethodResult tools_list(MethodEnv& env, const nlohmann::json& params);
MethodResult tools_call(MethodEnv& env, const nlohmann::json& params);
MethodResult resources_list(MethodEnv& env, const nlohmann::json& params);
MethodResult resources_templates_list(MethodEnv& env, const nlohmann::json& params);
MethodResult resources_read(MethodEnv& env, const nlohmann::json& params);
MethodResult resources_subscribe(MethodEnv& env, const nlohmann::json& params);
MethodResult resources_unsubscribe(MethodEnv& env, const nlohmann::json& params);
MethodResult prompts_list(MethodEnv& env, const nlohmann::json& params);
MethodResult prompts_get(MethodEnv& env, const nlohmann::json& params);
MethodResult completion_complete(MethodEnv& env, const nlohmann::json& params);
// Whether `uri` may be listened to (subscriptions/listen): what resources/subscribe accepts.
std::expected<void, RpcError> check_subscribable(MethodEnv& env, const std::string& uri);
// Tasks (methods_tasks.cpp): the modern extension's tasks/get, tasks/update, tasks/cancel and the
// legacy experimental tasks/get, tasks/result, tasks/list, tasks/cancel; the era decides the shape.
MethodResult tasks_get(MethodEnv& env, const nlohmann::json& params);
MethodResult tasks_result(MethodEnv& env, const nlohmann::json& params);
MethodResult tasks_list(MethodEnv& env, const nlohmann::json& params);
MethodResult tasks_cancel(MethodEnv& env, const nlohmann::json& params);
MethodResult tasks_update(MethodEnv& env, const nlohmann::json& params);
// Whether tools/call of `tool` runs as a task for this request (the client declared the tasks
// extension, or, in the legacy era, sent params.task), and the tools that may.
// A tool's definition says it may (execution.taskSupport "optional"): verify and sandbox_exec.
bool tool_runs_as_task(const MethodEnv& env, const nlohmann::json& definition, const nlohmann::json& params);
bool task_capable_tool(const nlohmann::json& definition);
// A task as each era shows it (modern: ttlMs/pollIntervalMs; legacy: ttl/pollInterval).
nlohmann::json task_json(const TaskSnapshot& task, bool modern);
// The modern DetailedTask: task_json plus the result (completed) or the error (failed), as
// tasks/get and notifications/tasks carry it.
nlohmann::json detailed_task_json(const TaskSnapshot& task);

// file:// URI <-> workspace path helpers shared by resources and completion.
std::string file_uri(const std::string& absolute_path);
// Decodes a file:// URI to an absolute path; empty when the URI is not a usable file URI.
std::string path_from_file_uri(const std::string& uri);

}  // namespace kiln::server
