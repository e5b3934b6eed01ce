// tools/list and tools/call: decode, validate arguments against the tool's inputSchema, run the
// handler, encode structuredContent plus the same JSON as a text block. Handler failures and bad
// arguments are tool results with isError (the model can correct itself); only protocol misuse
// (unknown tool, malformed params) is a JSON-RPC error.
#include <spdlog/spdlog.h>

#include "core/quote.h"
#include "protocol/errors.h"
#include "protocol/json_schema.h"
#include "protocol/mcp_era.h"
#include "protocol/jsonrpc.h"
#include "protocol/mcp_params.h"
#include "mcp/methods.h"
#include "mcp/server_identity.h"
#include "mcp/tool_registry.h"

namespace kiln::server {

namespace {

using nlohmann::json;

// Results above this are a Kiln bug (every long text is paged well below it).
constexpr std::size_t kMaxResultBytes = 1 << 20;

// Every tool error passes here: arguments quoted deep inside an engine's message (a path, a
// command) must not make the message itself huge, whichever of them did the quoting.
json error_result(const std::string& message) {
  return json{{"content", json::array({{{"type", "text"}, {"text", bounded(message, kMessageBytes)}}})},
              {"isError", true}};
}

// After a tool changed files, tell resource subscribers about the paths it reports.
void notify_changed_paths(MethodEnv& env, const json& args, const json& structured) {
  auto ws = env.state.workspace_for(args);
  if (!ws) return;
  for (const char* key : {"path", "from", "to"}) {
    if (structured.contains(key) && structured[key].is_string()) {
      std::string rel = structured[key].get<std::string>();
      std::string abs = (*ws)->root->path() + (rel.empty() || rel == "." ? "" : "/" + rel);
      env.resource_updated(file_uri(abs));
    }
  }
}

}  // namespace

MethodResult tools_list(MethodEnv& env, const json& params) {
  auto cursor = protocol::cursor(params);
  if (!cursor) return std::unexpected(RpcError{protocol::kInvalidParams, cursor.error().message});
  if (*cursor) {
    // All tools fit on one page, so no cursor was ever handed out.
    return std::unexpected(RpcError{protocol::kInvalidParams, "Invalid params: unknown cursor '" + **cursor + "'"});
  }
  json tools = json::array();
  for (auto& def : env.server.tools.definitions()) {
    // 2025-11-25 says per tool whether tools/call may be a task (the schema's execution);
    // 2026-07-28 has no such field: the server decides per request.
    if (env.modern) def.erase("execution");
    tools.push_back(std::move(def));
  }
  return json{{"tools", std::move(tools)}};
}

bool task_capable_tool(const json& definition) {
  return definition.contains("execution") && definition["execution"].value("taskSupport", "forbidden") != "forbidden";
}

bool tool_runs_as_task(const MethodEnv& env, const json& definition, const json& params) {
  if (!task_capable_tool(definition)) return false;
  if (env.modern) return protocol::declares_extension(env.client_capabilities, protocol::kTasksExtension);
  return params.is_object() && params.contains("task") && params["task"].is_object();
}

namespace {

// The tool's own run, after validation: shared by a direct call and a task.
MethodResult run_tool(MethodEnv& env, const ToolEntry& tool, const std::string& name, const json& arguments) {
  auto out = tool.handler(env.ctx, arguments);
  if (env.ctx.cancelled()) return error_result(name + " was cancelled");
  if (!out) {
    spdlog::debug("{} failed: {}", name, bounded(out.error().message, kMessageBytes));
    return error_result(out.error().message);
  }
  if (!tool.definition["annotations"].value("readOnlyHint", false)) {
    notify_changed_paths(env, arguments, out->structured);
  }
  std::string text = protocol::serialize(out->structured);
  if (text.size() > kMaxResultBytes / 2) {
    spdlog::error("{} produced {} bytes of result; refusing to send it", name, text.size());
    return error_result(name + " produced a result too large to send; narrow the request (offset/limit)");
  }
  return json{{"content", json::array({{{"type", "text"}, {"text", std::move(text)}}})},
              {"structuredContent", std::move(out->structured)},
              {"isError", false}};
}

std::optional<std::int64_t> requested_ttl(const json& params) {
  if (!params.is_object() || !params.contains("task") || !params["task"].is_object()) return std::nullopt;
  const json& ttl = params["task"]["ttl"];
  if (ttl.is_number_integer() && ttl.get<std::int64_t>() > 0) return ttl.get<std::int64_t>();
  return std::nullopt;
}

// Starts the call as a task and answers with its handle (each era's CreateTaskResult).
MethodResult start_task(MethodEnv& env, const ToolEntry& tool, const std::string& name, json arguments,
                        const json& params) {
  ServerContext& server = env.server;
  auto state = env.state_owner;
  bool modern = env.modern;
  json caps = env.client_capabilities;
  const ToolEntry* entry = &tool;
  auto work = [&server, state, modern, caps, entry, name, arguments = std::move(arguments)](
                  std::stop_token stop, std::function<void(std::string)> status) -> MethodResult {
    CallContext ctx;
    ctx.request_id = nullptr;
    ctx.stop = stop;
    ctx.session = state.get();
    ctx.modern = modern;
    ctx.client_capabilities = caps;
    ctx.progress = [status, last = -1.0](double progress, std::optional<double> total, std::string_view message) mutable {
      if (!(progress > last)) return;
      last = progress;
      std::string text(message);
      if (total) text += (text.empty() ? "" : " ") + fmt::format("({}/{})", progress, *total);
      status(text.empty() ? fmt::format("{}", progress) : text);
    };
    ctx.log = [](std::string_view, std::string_view) {};  // tasks carry no log messages (extension)
    MethodEnv task_env{server, *state, ctx, modern, caps, state, [](const std::string&, bool) {},
                       [&server, principal = state->principal()](const std::string& uri) {
                         server.shared->events.publish(principal, uri);
                       }};
    return run_tool(task_env, *entry, name, arguments);
  };
  auto t = server.shared->tasks.start(env.state.principal(), modern ? std::nullopt : requested_ttl(params), std::move(work));
  if (!t) {
    return std::unexpected(RpcError{protocol::kInternalError,
                                    fmt::format("Internal error: {} tasks of yours are running already; wait for one to "
                                                "end or cancel one (tasks/cancel)", TaskRegistry::kMaxRunningPerPrincipal)});
  }
  if (modern) {
    json out = task_json(*t, true);
    out["resultType"] = "task";
    return out;
  }
  return json{{"task", task_json(*t, false)}};
}

}  // namespace

MethodResult tools_call(MethodEnv& env, const json& params) {
  auto p = protocol::decode_call_tool(params);
  if (!p) return std::unexpected(RpcError{protocol::kInvalidParams, p.error().message});
  const ToolEntry* tool = env.server.tools.find(p->name);
  if (!tool) return std::unexpected(RpcError{protocol::kInvalidParams, "Unknown tool: " + bounded(p->name)});

  if (auto bad = protocol::validate(tool->definition["inputSchema"], p->arguments)) {
    std::string where = bad->path.empty() ? "arguments" : "arguments" + bad->path;
    return error_result("Invalid arguments for " + p->name + ": " + where + ": " + bad->message);
  }
  if (!env.modern && params.is_object() && params.contains("task") && !task_capable_tool(tool->definition)) {
    // 2025-11-25: a task-augmented call of a tool whose taskSupport is "forbidden".
    return std::unexpected(RpcError{protocol::kMethodNotFound,
                                    "Method not found: " + bounded(p->name) + " does not run as a task (its "
                                    "execution.taskSupport is forbidden); call it without params.task"});
  }
  // Handlers read the schema's defaults from here instead of restating them.
  protocol::apply_defaults(tool->definition["inputSchema"], p->arguments);
  if (tool->preflight) {
    if (env.modern && params.is_object() && params.contains("inputResponses") && params["inputResponses"].is_object())
      env.ctx.input_responses = params["inputResponses"];
    auto needs = tool->preflight(env.ctx, p->arguments);
    if (!needs) return error_result(needs.error().message);
    // A cancellation is left to the tool itself, which records it (a cancelled run's trace).
    if (*needs) {
      // Modern era (MRTR): the client shows these to the person and calls again.
      return json{{"resultType", "input_required"}, {"inputRequests", std::move(**needs)}};
    }
  }
  if (env.server.before_tool_call && env.ctx.session) env.server.before_tool_call(env.ctx.session->principal());
  if (tool_runs_as_task(env, tool->definition, params)) return start_task(env, *tool, p->name, std::move(p->arguments), params);
  return run_tool(env, *tool, p->name, p->arguments);
}

}  // namespace kiln::server
