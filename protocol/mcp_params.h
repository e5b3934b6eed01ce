// Typed decoding of the MCP request params the server reads; each failure names the JSON path of
// the bad field ("params.clientInfo.name: expected string, got integer"), ready for a -32602 reply.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace kiln::protocol {

// All decoders take the request's params (an object, or null when the message had none) and fail
// with Errc::invalid_argument.

struct InitializeParams {
  std::string protocol_version;
  nlohmann::json capabilities = nlohmann::json::object();  // optional on the wire here, default {}
  std::string client_name;
  std::string client_version;
};
Result<InitializeParams> decode_initialize(const nlohmann::json& params);

struct CallToolParams {
  std::string name;
  nlohmann::json arguments = nlohmann::json::object();  // absent or null -> {}
};
Result<CallToolParams> decode_call_tool(const nlohmann::json& params);

// params._meta.progressToken (string or integer), when the client asked for progress.
Result<std::optional<nlohmann::json>> progress_token(const nlohmann::json& params);

// params.cursor of the paginated list methods.
Result<std::optional<std::string>> cursor(const nlohmann::json& params);

struct CancelledParams {
  nlohmann::json request_id;  // string or integer
  std::string reason;         // "" when absent
};
Result<CancelledParams> decode_cancelled(const nlohmann::json& params);

struct SetLevelParams {
  std::string level;  // one of the 8 RFC 5424 names
};
Result<SetLevelParams> decode_set_level(const nlohmann::json& params);

// debug 0 < info < notice < warning < error < critical < alert < emergency 7; -1 when unknown.
int log_level_rank(std::string_view level);

struct ReadResourceParams {
  std::string uri;
};
Result<ReadResourceParams> decode_read_resource(const nlohmann::json& params);

struct GetPromptParams {
  std::string name;
  std::map<std::string, std::string> arguments;
};
Result<GetPromptParams> decode_get_prompt(const nlohmann::json& params);

struct CompleteParams {
  std::string ref_type;         // "ref/prompt" or "ref/resource"
  std::string ref_name_or_uri;  // ref.name for prompts, ref.uri for resources
  std::string argument_name;
  std::string argument_value;
  nlohmann::json context_arguments = nlohmann::json::object();  // context.arguments, default {}
};
Result<CompleteParams> decode_complete(const nlohmann::json& params);

}  // namespace kiln::protocol
