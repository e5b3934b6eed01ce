// Capabilities and identity of the server, per era (see server_identity.h).
#include "mcp/server_identity.h"

#include <array>

#include "protocol/mcp_era.h"

namespace kiln::server {

using nlohmann::json;

json server_info() { return json{{"name", "kiln"}, {"title", "Kiln"}, {"version", KILN_VERSION}}; }

const char* server_instructions(bool modern) {
  if (modern) {
    return "Kiln gives you a durable workspace. Call workspace_open with a folder and pass the workspace id it "
           "returns as \"workspace\" to every workspace tool (requests of MCP 2026-07-28 carry no session, so "
           "there is no current workspace unless the server was started with --workspace). Paths are relative "
           "to the workspace root; long results are paged: pass next_offset back as offset to read on.";
  }
  return "Kiln gives you a durable workspace. Call workspace_open with a folder (unless one is already "
         "open), then use the file_* tools. Paths are relative to the workspace root; long results are "
         "paged: pass next_offset back as offset to read on.";
}

json legacy_capabilities() {
  return json{{"tools", {{"listChanged", false}}},
              {"resources", {{"subscribe", true}, {"listChanged", false}}},
              {"prompts", {{"listChanged", false}}},
              {"logging", json::object()},
              {"completions", json::object()},
              // 2025-11-25's experimental tasks: tools/call may be task-augmented (verify, sandbox_exec).
              {"tasks", {{"list", json::object()}, {"cancel", json::object()},
                         {"requests", {{"tools", {{"call", json::object()}}}}}}}};
}

json modern_capabilities() {
  return json{{"tools", {{"listChanged", false}}},
              {"resources", {{"subscribe", true}, {"listChanged", false}}},
              {"prompts", {{"listChanged", false}}},
              {"logging", json::object()},
              {"completions", json::object()},
              {"extensions", {{protocol::kTasksExtension, json::object()}}}};
}

json discover_result() {
  json versions = json::array();
  for (auto v : protocol::all_protocol_versions()) versions.push_back(std::string(v));
  json out = {{"supportedVersions", std::move(versions)},
              {"capabilities", modern_capabilities()},
              {"instructions", server_instructions(true)}};
  decorate_modern_result("server/discover", out);
  return out;
}

void decorate_modern_result(std::string_view method, json& result) {
  if (!result.is_object()) return;
  if (!result.contains("resultType")) result["resultType"] = "complete";
  if (!result.contains("_meta") || !result["_meta"].is_object()) result["_meta"] = json::object();
  result["_meta"][protocol::kMetaServerInfo] = json{{"name", "kiln"}, {"version", KILN_VERSION}};
  static constexpr std::array<std::string_view, 6> kCacheable = {
      "tools/list", "prompts/list", "resources/list", "resources/templates/list", "resources/read", "server/discover"};
  for (auto m : kCacheable) {
    if (m != method) continue;
    // Tools, prompts and capabilities change only with the binary; files and traces at any moment.
    bool stable = method == "tools/list" || method == "prompts/list" || method == "server/discover";
    if (!result.contains("ttlMs")) result["ttlMs"] = stable ? 300000 : 0;
    if (!result.contains("cacheScope")) result["cacheScope"] = "private";
  }
}

}  // namespace kiln::server
