// MCP protocol revisions Kiln speaks and how a client's requested revision is answered.
#pragma once

#include <span>
#include <string>
#include <string_view>

namespace kiln::protocol {

inline constexpr std::string_view kLatestProtocolVersion = "2025-11-25";

// Newest first.
std::span<const std::string_view> supported_protocol_versions();

// The spec's negotiation: echo a supported version, otherwise answer with our latest (the client
// decides whether it can live with that). Never an error.
std::string negotiate_protocol_version(std::string_view requested);

}  // namespace kiln::protocol
