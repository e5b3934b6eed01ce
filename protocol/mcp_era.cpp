// Reading the modern per-request envelope (2026-07-28 basic/index "_meta").
#include "protocol/mcp_era.h"

#include <algorithm>
#include <array>

#include "protocol/mcp_params.h"

namespace kiln::protocol {

using nlohmann::json;

namespace {
constexpr std::array<std::string_view, 4> kAllVersions = {"2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26"};

const json* meta_of(const json& params) {
  if (!params.is_object()) return nullptr;
  auto it = params.find("_meta");
  if (it == params.end() || !it->is_object()) return nullptr;
  return &*it;
}
}  // namespace

std::span<const std::string_view> all_protocol_versions() { return kAllVersions; }

bool is_modern_version(std::string_view version) { return version == kModernProtocolVersion; }

bool carries_modern_meta(const json& params) {
  const json* meta = meta_of(params);
  return meta && meta->contains(kMetaProtocolVersion);
}

Result<RequestMeta> decode_request_meta(const json& params) {
  const json* meta = meta_of(params);
  if (!meta || !meta->contains(kMetaProtocolVersion)) {
    return fail(Errc::invalid_argument, std::string("Invalid params: params._meta[\"") + kMetaProtocolVersion +
                                            "\"] is required (MCP 2026-07-28 requests carry their version)");
  }
  RequestMeta out;
  const json& version = (*meta)[kMetaProtocolVersion];
  if (!version.is_string()) {
    return fail(Errc::invalid_argument,
                std::string("Invalid params: params._meta[\"") + kMetaProtocolVersion + "\"] must be a string");
  }
  out.protocol_version = version.get<std::string>();
  auto caps = meta->find(kMetaClientCapabilities);
  if (caps == meta->end()) {
    return fail(Errc::invalid_argument, std::string("Invalid params: params._meta[\"") + kMetaClientCapabilities +
                                            "\"] is required (an object, {} when the client declares none)");
  }
  if (!caps->is_object()) {
    return fail(Errc::invalid_argument,
                std::string("Invalid params: params._meta[\"") + kMetaClientCapabilities + "\"] must be an object");
  }
  out.client_capabilities = *caps;
  if (auto info = meta->find(kMetaClientInfo); info != meta->end()) {
    if (!info->is_object()) {
      return fail(Errc::invalid_argument,
                  std::string("Invalid params: params._meta[\"") + kMetaClientInfo + "\"] must be an object");
    }
    out.client_info = *info;
  }
  if (auto level = meta->find(kMetaLogLevel); level != meta->end()) {
    if (!level->is_string() || log_level_rank(level->get<std::string>()) < 0) {
      return fail(Errc::invalid_argument,
                  std::string("Invalid params: params._meta[\"") + kMetaLogLevel +
                      "\"] must be one of debug, info, notice, warning, error, critical, alert, emergency");
    }
    out.log_level = level->get<std::string>();
  }
  return out;
}

bool declares_extension(const json& capabilities, std::string_view id) {
  if (!capabilities.is_object()) return false;
  auto ext = capabilities.find("extensions");
  return ext != capabilities.end() && ext->is_object() && ext->contains(std::string(id));
}

bool supports_url_elicitation(const json& capabilities) {
  if (!capabilities.is_object()) return false;
  auto el = capabilities.find("elicitation");
  return el != capabilities.end() && el->is_object() && el->contains("url");
}

}  // namespace kiln::protocol
