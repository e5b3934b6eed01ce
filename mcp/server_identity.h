// Who the server says it is and what it offers, in each era: the initialize result's capabilities
// (legacy), server/discover's answer (both eras), and the fields every modern result carries
// (resultType, serverInfo, and ttlMs/cacheScope on cacheable ones).
#pragma once

#include <string_view>

#include <nlohmann/json.hpp>

namespace kiln::server {

nlohmann::json server_info();                // {name, title, version}
const char* server_instructions(bool modern);
nlohmann::json legacy_capabilities();        // for InitializeResult
nlohmann::json modern_capabilities();        // for DiscoverResult

// The server/discover result (its ttlMs/cacheScope included).
nlohmann::json discover_result();

// Adds what a 2026-07-28 result must or should carry to `result`, the answer to `method`:
// resultType "complete" unless the result names its own, _meta serverInfo, and for the list
// methods, resources/read and server/discover, ttlMs and cacheScope ("private": answers depend on
// who asks and on the workspace, so no shared cache may keep them).
void decorate_modern_result(std::string_view method, nlohmann::json& result);

}  // namespace kiln::server
