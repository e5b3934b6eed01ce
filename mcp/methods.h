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
#include "mcp/session.h"
#include "mcp/session_state.h"

namespace kiln::server {

struct RpcError {
  int code;
  std::string message;
  nlohmann::json data = nullptr;
};

using MethodResult = std::expected<nlohmann::json, RpcError>;

// What a method handler may use besides its params.
struct MethodEnv {
  ServerContext& server;
  SessionState& state;
  CallContext& ctx;
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

// file:// URI <-> workspace path helpers shared by resources and completion.
std::string file_uri(const std::string& absolute_path);
// Decodes a file:// URI to an absolute path; empty when the URI is not a usable file URI.
std::string path_from_file_uri(const std::string& uri);

}  // namespace kiln::server
