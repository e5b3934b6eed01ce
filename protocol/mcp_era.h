// The two eras of MCP a request can belong to (basic/versioning of 2026-07-28): legacy requests
// ride on an `initialize` handshake, modern ones carry their version, capabilities and identity in
// params._meta under io.modelcontextprotocol/ keys. This file reads and checks that envelope.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace kiln::protocol {

inline constexpr std::string_view kModernProtocolVersion = "2026-07-28";

// The _meta keys MCP reserves for the envelope and for what results and notifications carry.
inline constexpr const char* kMetaProtocolVersion = "io.modelcontextprotocol/protocolVersion";
inline constexpr const char* kMetaClientCapabilities = "io.modelcontextprotocol/clientCapabilities";
inline constexpr const char* kMetaClientInfo = "io.modelcontextprotocol/clientInfo";
inline constexpr const char* kMetaLogLevel = "io.modelcontextprotocol/logLevel";
inline constexpr const char* kMetaServerInfo = "io.modelcontextprotocol/serverInfo";
inline constexpr const char* kMetaSubscriptionId = "io.modelcontextprotocol/subscriptionId";
inline constexpr const char* kMetaRelatedTask = "io.modelcontextprotocol/related-task";
// The tasks extension's identifier (capabilities.extensions).
inline constexpr const char* kTasksExtension = "io.modelcontextprotocol/tasks";

// Every revision Kiln serves, modern first: what server/discover lists and -32022 names.
std::span<const std::string_view> all_protocol_versions();
bool is_modern_version(std::string_view version);

// Whether a request's params carry the modern envelope (its protocol version key), i.e. whether
// it is to be served statelessly. Says nothing about the envelope's validity.
bool carries_modern_meta(const nlohmann::json& params);

struct RequestMeta {
  std::string protocol_version;
  nlohmann::json client_capabilities = nlohmann::json::object();
  nlohmann::json client_info = nlohmann::json::object();  // {} when the client sent none
  std::optional<std::string> log_level;                   // absent: no notifications/message
};

// Decodes params._meta's envelope. Fails (Errc::invalid_argument, for a -32602 reply) when the
// version or the capabilities are missing or of the wrong type, or the log level is not one of
// the eight names. An unsupported version is not an error here: see is_modern_version.
Result<RequestMeta> decode_request_meta(const nlohmann::json& params);

// Whether `capabilities` (a client's) lists extension `id` under capabilities.extensions.
bool declares_extension(const nlohmann::json& capabilities, std::string_view id);
// Whether a client's capabilities allow URL-mode elicitation (elicitation.url present).
bool supports_url_elicitation(const nlohmann::json& capabilities);

}  // namespace kiln::protocol
