// The tasks methods, for both eras. Modern (the io.modelcontextprotocol/tasks extension): tasks/get
// returns the task with its result or error inlined, tasks/update acknowledges, tasks/cancel
// acknowledges. Legacy (2025-11-25, experimental): tasks/get and tasks/cancel return the task,
// tasks/result waits for the outcome and returns it, tasks/list lists the principal's tasks.
#include <fmt/format.h>

#include "core/quote.h"
#include "protocol/errors.h"
#include "protocol/mcp_era.h"
#include "mcp/methods.h"
#include "mcp/server_identity.h"

namespace kiln::server {

namespace {

using nlohmann::json;

std::expected<std::string, RpcError> task_id_param(const json& params) {
  if (!params.is_object() || !params.contains("taskId") || !params["taskId"].is_string()) {
    return std::unexpected(RpcError{protocol::kInvalidParams, "Invalid params: taskId (a string) is required"});
  }
  return params["taskId"].get<std::string>();
}

RpcError unknown_task(const std::string& id) {
  return RpcError{protocol::kInvalidParams,
                  "Invalid params: no task " + bounded(id) +
                      " (it never existed, belongs to someone else, or its time to live passed)"};
}

json error_object(const RpcError& e) {
  json out = {{"code", e.code}, {"message", e.message}};
  if (!e.data.is_null()) out["data"] = e.data;
  return out;
}

// A legacy tools/call task whose result is an error result has failed, in 2025-11-25's terms.
std::string legacy_status(const TaskSnapshot& t) {
  if (t.status == "completed" && t.result && t.result->value("isError", false)) return "failed";
  return t.status;
}

}  // namespace

json task_json(const TaskSnapshot& t, bool modern) {
  json out = {{"taskId", t.id}, {"status", modern ? t.status : legacy_status(t)},
              {"createdAt", t.created_at}, {"lastUpdatedAt", t.updated_at}};
  if (!t.status_message.empty()) out["statusMessage"] = t.status_message;
  if (modern) {
    out["ttlMs"] = t.ttl_ms;
    out["pollIntervalMs"] = t.poll_ms;
  } else {
    out["ttl"] = t.ttl_ms;
    out["pollInterval"] = t.poll_ms;
  }
  return out;
}

json detailed_task_json(const TaskSnapshot& t) {
  json out = task_json(t, true);
  if (t.status == "completed" && t.result) {
    json result = *t.result;
    decorate_modern_result("tools/call", result);
    out["result"] = std::move(result);
  } else if (t.status == "failed" && t.error) {
    out["error"] = error_object(*t.error);
  }
  return out;
}

MethodResult tasks_get(MethodEnv& env, const json& params) {
  auto id = task_id_param(params);
  if (!id) return std::unexpected(id.error());
  auto t = env.server.shared->tasks.get(env.state.principal(), *id);
  if (!t) return std::unexpected(unknown_task(*id));
  return env.modern ? detailed_task_json(*t) : task_json(*t, false);
}

MethodResult tasks_result(MethodEnv& env, const json& params) {
  auto id = task_id_param(params);
  if (!id) return std::unexpected(id.error());
  auto t = env.server.shared->tasks.wait(env.state.principal(), *id, env.ctx.stop);
  if (!t) return std::unexpected(unknown_task(*id));
  if (!t->terminal()) return std::unexpected(RpcError{protocol::kInternalError, "the server is stopping"});
  if (t->status == "cancelled") {
    return std::unexpected(RpcError{protocol::kInvalidParams, "Invalid params: task " + *id + " was cancelled"});
  }
  if (t->error) return std::unexpected(*t->error);
  json result = t->result.value_or(json::object());
  result["_meta"][protocol::kMetaRelatedTask] = {{"taskId", t->id}};
  return result;
}

MethodResult tasks_list(MethodEnv& env, const json& params) {
  if (params.is_object() && params.contains("cursor")) {
    return std::unexpected(RpcError{protocol::kInvalidParams, "Invalid params: unknown cursor (tasks/list has one page)"});
  }
  json tasks = json::array();
  for (const auto& t : env.server.shared->tasks.list(env.state.principal())) tasks.push_back(task_json(t, false));
  return json{{"tasks", std::move(tasks)}};
}

MethodResult tasks_cancel(MethodEnv& env, const json& params) {
  auto id = task_id_param(params);
  if (!id) return std::unexpected(id.error());
  TaskSnapshot after;
  auto outcome = env.server.shared->tasks.cancel(env.state.principal(), *id, &after);
  if (outcome == TaskRegistry::Cancel::unknown) return std::unexpected(unknown_task(*id));
  if (env.modern) return json::object();  // an acknowledgement, whatever the task had reached
  if (outcome == TaskRegistry::Cancel::already_terminal) {
    return std::unexpected(RpcError{protocol::kInvalidParams,
                                    fmt::format("Invalid params: task {} is already {}", *id, legacy_status(after))});
  }
  return task_json(after, false);
}

MethodResult tasks_update(MethodEnv& env, const json& params) {
  auto id = task_id_param(params);
  if (!id) return std::unexpected(id.error());
  if (!env.server.shared->tasks.get(env.state.principal(), *id)) return std::unexpected(unknown_task(*id));
  // Kiln's tasks never wait for input (secrets are asked before a task starts), so responses
  // have nothing to answer; the acknowledgement is all the extension asks for.
  return json::object();
}

}  // namespace kiln::server
