// Logging: spdlog to stderr (stdout is reserved for protocol messages), plus sinks that forward
// log lines to MCP clients as notifications/message once they asked with logging/setLevel.
#pragma once

#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include <spdlog/common.h>

namespace kiln::server {

// The level names `--log-level` lists: MCP's (RFC 5424) that a person would pick, and "off".
std::span<const std::string_view> log_level_names();

// A level name (those above, or another RFC 5424 or spdlog spelling) as spdlog's level; nullopt
// for anything else.
std::optional<spdlog::level::level_enum> parse_level(std::string_view level);

// Sets up the stderr logger; `level` is a name parse_level takes (an unknown one is info).
void init_logging(std::string_view level);

// The daemon's logger: a rotating file (3 x 10 MiB) flushed each second and at once for warnings,
// rather than a write(2) per request line; stays on stderr when the file cannot be opened.
void init_file_logging(const std::string& path, std::string_view level);

using ClientLogSink = std::function<void(std::string_view mcp_level, std::string_view text)>;
int add_client_log_sink(ClientLogSink sink);
void remove_client_log_sink(int id);

}  // namespace kiln::server
