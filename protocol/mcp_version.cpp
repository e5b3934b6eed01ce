// Protocol revision negotiation (MCP lifecycle, "Version Negotiation").
#include "protocol/mcp_version.h"

#include <algorithm>
#include <array>

namespace kiln::protocol {

namespace {
constexpr std::array<std::string_view, 3> kSupported = {"2025-11-25", "2025-06-18", "2025-03-26"};
}

std::span<const std::string_view> supported_protocol_versions() { return kSupported; }

std::string negotiate_protocol_version(std::string_view requested) {
  if (std::ranges::find(kSupported, requested) != kSupported.end()) return std::string(requested);
  return std::string(kLatestProtocolVersion);
}

}  // namespace kiln::protocol
