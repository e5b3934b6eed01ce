// Logging: spdlog to stderr (stdout is reserved for protocol messages), plus sinks that forward
// log lines to MCP clients as notifications/message once they asked with logging/setLevel.
#pragma once

#include <functional>
#include <string_view>

namespace kiln::server {

// Sets up the stderr logger; `level` is an MCP/RFC 5424 level name or spdlog name.
void init_logging(std::string_view level);

using ClientLogSink = std::function<void(std::string_view mcp_level, std::string_view text)>;
int add_client_log_sink(ClientLogSink sink);
void remove_client_log_sink(int id);

}  // namespace kiln::server
