// tools/list and tools/call: decode, validate arguments against the tool's inputSchema, run the
// handler, encode structuredContent plus the same JSON as a text block. Handler failures and bad
// arguments are tool results with isError (the model can correct itself); only protocol misuse
// (unknown tool, malformed params) is a JSON-RPC error.
#include <spdlog/spdlog.h>

#include "core/quote.h"
#include "protocol/errors.h"
#include "protocol/json_schema.h"
#include "protocol/jsonrpc.h"
#include "protocol/mcp_params.h"
#include "mcp/methods.h"
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
  for (auto& def : env.server.tools.definitions()) tools.push_back(def);
  return json{{"tools", std::move(tools)}};
}

MethodResult tools_call(MethodEnv& env, const json& params) {
  auto p = protocol::decode_call_tool(params);
  if (!p) return std::unexpected(RpcError{protocol::kInvalidParams, p.error().message});
  const ToolEntry* tool = env.server.tools.find(p->name);
  if (!tool) return std::unexpected(RpcError{protocol::kInvalidParams, "Unknown tool: " + bounded(p->name)});

  if (auto bad = protocol::validate(tool->definition["inputSchema"], p->arguments)) {
    std::string where = bad->path.empty() ? "arguments" : "arguments" + bad->path;
    return error_result("Invalid arguments for " + p->name + ": " + where + ": " + bad->message);
  }
  // Handlers read the schema's defaults from here instead of restating them.
  protocol::apply_defaults(tool->definition["inputSchema"], p->arguments);
  auto out = tool->handler(env.ctx, p->arguments);
  if (env.ctx.cancelled()) return error_result(p->name + " was cancelled");
  if (!out) {
    spdlog::debug("{} failed: {}", p->name, bounded(out.error().message, kMessageBytes));
    return error_result(out.error().message);
  }
  if (!tool->definition["annotations"].value("readOnlyHint", false)) {
    notify_changed_paths(env, p->arguments, out->structured);
  }
  std::string text = protocol::serialize(out->structured);
  if (text.size() > kMaxResultBytes / 2) {
    spdlog::error("{} produced {} bytes of result; refusing to send it", p->name, text.size());
    return error_result(p->name + " produced a result too large to send; narrow the request (offset/limit)");
  }
  return json{{"content", json::array({{{"type", "text"}, {"text", std::move(text)}}})},
              {"structuredContent", std::move(out->structured)},
              {"isError", false}};
}

}  // namespace kiln::server
