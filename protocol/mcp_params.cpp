// Field-by-field decoding in the clangd style: small helpers that know the path they are reading,
// so every error message points at the exact field without callers building paths themselves.
#include "protocol/mcp_params.h"

#include <array>
#include <utility>

#include "protocol/json_type.h"

namespace kiln::protocol {

using nlohmann::json;

namespace {

constexpr std::array<std::string_view, 8> kLogLevels = {"debug", "info",     "notice", "warning",
                                                        "error", "critical", "alert",  "emergency"};

std::unexpected<Error> bad(const std::string& path, std::string_view what) {
  return fail(Errc::invalid_argument, path + ": " + std::string(what));
}

std::unexpected<Error> wrong_type(const std::string& path, std::string_view expected, const json& v) {
  return bad(path, "expected " + std::string(expected) + ", got " + std::string(json_type_name(v)));
}

// The object at `path`, with null standing for "no params" (empty object).
Result<const json*> object_at(const json& v, const std::string& path) {
  static const json kEmpty = json::object();
  if (v.is_null()) return &kEmpty;
  if (!v.is_object()) return wrong_type(path, "object", v);
  return &v;
}

// A member that may be absent; nullptr when absent.
const json* member(const json& obj, std::string_view key) {
  const auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

Result<std::string> required_string(const json& obj, std::string_view key, const std::string& path) {
  const json* v = member(obj, key);
  const std::string at = path + "." + std::string(key);
  if (!v) return bad(at, "required field is missing");
  if (!v->is_string()) return wrong_type(at, "string", *v);
  return v->get<std::string>();
}

Result<std::optional<std::string>> optional_string(const json& obj, std::string_view key,
                                                   const std::string& path) {
  const json* v = member(obj, key);
  if (!v) return std::nullopt;
  if (!v->is_string()) return wrong_type(path + "." + std::string(key), "string", *v);
  return v->get<std::string>();
}

// An optional object member: {} when absent.
Result<json> optional_object(const json& obj, std::string_view key, const std::string& path) {
  const json* v = member(obj, key);
  if (!v) return json::object();
  if (!v->is_object()) return wrong_type(path + "." + std::string(key), "object", *v);
  return *v;
}

bool is_request_id(const json& v) { return v.is_string() || v.is_number_integer(); }

}  // namespace

Result<InitializeParams> decode_initialize(const json& params) {
  auto p = object_at(params, "params");
  if (!p) return std::unexpected(p.error());
  InitializeParams out;
  auto version = required_string(**p, "protocolVersion", "params");
  if (!version) return std::unexpected(version.error());
  out.protocol_version = std::move(*version);
  auto caps = optional_object(**p, "capabilities", "params");
  if (!caps) return std::unexpected(caps.error());
  out.capabilities = std::move(*caps);
  const json* info = member(**p, "clientInfo");
  if (!info) return bad("params.clientInfo", "required field is missing");
  if (!info->is_object()) return wrong_type("params.clientInfo", "object", *info);
  auto name = required_string(*info, "name", "params.clientInfo");
  if (!name) return std::unexpected(name.error());
  auto ver = required_string(*info, "version", "params.clientInfo");
  if (!ver) return std::unexpected(ver.error());
  out.client_name = std::move(*name);
  out.client_version = std::move(*ver);
  return out;
}

Result<CallToolParams> decode_call_tool(const json& params) {
  auto p = object_at(params, "params");
  if (!p) return std::unexpected(p.error());
  CallToolParams out;
  auto name = required_string(**p, "name", "params");
  if (!name) return std::unexpected(name.error());
  out.name = std::move(*name);
  // Some clients send "arguments": null for a tool without parameters; that means "none".
  if (const json* args = member(**p, "arguments"); args && !args->is_null()) {
    if (!args->is_object()) return wrong_type("params.arguments", "object", *args);
    out.arguments = *args;
  }
  return out;
}

Result<std::optional<json>> progress_token(const json& params) {
  auto p = object_at(params, "params");
  if (!p) return std::unexpected(p.error());
  const json* meta = member(**p, "_meta");
  if (!meta) return std::nullopt;
  if (!meta->is_object()) return wrong_type("params._meta", "object", *meta);
  const json* token = member(*meta, "progressToken");
  if (!token) return std::nullopt;
  if (!is_request_id(*token)) return wrong_type("params._meta.progressToken", "string or integer", *token);
  return *token;
}

Result<std::optional<std::string>> cursor(const json& params) {
  auto p = object_at(params, "params");
  if (!p) return std::unexpected(p.error());
  return optional_string(**p, "cursor", "params");
}

Result<CancelledParams> decode_cancelled(const json& params) {
  auto p = object_at(params, "params");
  if (!p) return std::unexpected(p.error());
  const json* id = member(**p, "requestId");
  if (!id) return bad("params.requestId", "required field is missing");
  if (!is_request_id(*id)) return wrong_type("params.requestId", "string or integer", *id);
  auto reason = optional_string(**p, "reason", "params");
  if (!reason) return std::unexpected(reason.error());
  return CancelledParams{*id, reason->value_or("")};
}

int log_level_rank(std::string_view level) {
  for (std::size_t i = 0; i < kLogLevels.size(); ++i) {
    if (kLogLevels[i] == level) return static_cast<int>(i);
  }
  return -1;
}

Result<SetLevelParams> decode_set_level(const json& params) {
  auto p = object_at(params, "params");
  if (!p) return std::unexpected(p.error());
  auto level = required_string(**p, "level", "params");
  if (!level) return std::unexpected(level.error());
  if (log_level_rank(*level) < 0) {
    std::string all;
    for (auto l : kLogLevels) all += (all.empty() ? "" : ", ") + std::string(l);
    return bad("params.level", "'" + *level + "' is not a log level; use one of: " + all);
  }
  return SetLevelParams{std::move(*level)};
}

Result<ReadResourceParams> decode_read_resource(const json& params) {
  auto p = object_at(params, "params");
  if (!p) return std::unexpected(p.error());
  auto uri = required_string(**p, "uri", "params");
  if (!uri) return std::unexpected(uri.error());
  return ReadResourceParams{std::move(*uri)};
}

Result<GetPromptParams> decode_get_prompt(const json& params) {
  auto p = object_at(params, "params");
  if (!p) return std::unexpected(p.error());
  GetPromptParams out;
  auto name = required_string(**p, "name", "params");
  if (!name) return std::unexpected(name.error());
  out.name = std::move(*name);
  auto args = optional_object(**p, "arguments", "params");
  if (!args) return std::unexpected(args.error());
  for (const auto& [key, value] : args->items()) {
    if (!value.is_string()) return wrong_type("params.arguments." + key, "string", value);
    out.arguments.emplace(key, value.get<std::string>());
  }
  return out;
}

Result<CompleteParams> decode_complete(const json& params) {
  auto p = object_at(params, "params");
  if (!p) return std::unexpected(p.error());
  CompleteParams out;

  const json* ref = member(**p, "ref");
  if (!ref) return bad("params.ref", "required field is missing");
  if (!ref->is_object()) return wrong_type("params.ref", "object", *ref);
  auto type = required_string(*ref, "type", "params.ref");
  if (!type) return std::unexpected(type.error());
  if (*type != "ref/prompt" && *type != "ref/resource") {
    return bad("params.ref.type", "'" + *type + "' is not one of: ref/prompt, ref/resource");
  }
  auto target = required_string(*ref, *type == "ref/prompt" ? "name" : "uri", "params.ref");
  if (!target) return std::unexpected(target.error());
  out.ref_type = std::move(*type);
  out.ref_name_or_uri = std::move(*target);

  const json* arg = member(**p, "argument");
  if (!arg) return bad("params.argument", "required field is missing");
  if (!arg->is_object()) return wrong_type("params.argument", "object", *arg);
  auto arg_name = required_string(*arg, "name", "params.argument");
  if (!arg_name) return std::unexpected(arg_name.error());
  auto arg_value = required_string(*arg, "value", "params.argument");
  if (!arg_value) return std::unexpected(arg_value.error());
  out.argument_name = std::move(*arg_name);
  out.argument_value = std::move(*arg_value);

  auto context = optional_object(**p, "context", "params");
  if (!context) return std::unexpected(context.error());
  auto ctx_args = optional_object(*context, "arguments", "params.context");
  if (!ctx_args) return std::unexpected(ctx_args.error());
  for (const auto& [key, value] : ctx_args->items()) {
    if (!value.is_string()) return wrong_type("params.context.arguments." + key, "string", value);
  }
  out.context_arguments = std::move(*ctx_args);
  return out;
}

}  // namespace kiln::protocol
