// service_list, service_restart: the services of a session sandbox (TOOLS.md, services inside the
// sandbox). The lifecycle itself is services/service_host.cpp.
#include <fmt/format.h>

#include "mcp/session_state.h"
#include "services/service_host.h"
#include "tools/sandbox_common.h"

namespace kiln::server {

namespace {

using nlohmann::json;
namespace sbx = kiln::sandbox;

// The sandbox_id argument, if it names a live sandbox of the caller's (another owner's is unknown).
Result<std::string> live_sandbox(CallContext& ctx, sbx::SandboxManager& m, const json& args) {
  const std::string id = args.at("sandbox_id");
  if (!m.policy_of(ctx.session->principal(), id))
    return fail(Errc::not_found, fmt::format("no live sandbox '{}': call sandbox_list to see the live ones", id));
  return id;
}

Result<ToolOutput> service_list(CallContext& ctx, sbx::SandboxManager& m, services::ServiceHost& services,
                                const json& args) {
  auto id = live_sandbox(ctx, m, args);
  if (!id) return std::unexpected(id.error());
  json list = json::array();
  for (const auto& s : services.list(ctx.session->principal(), *id)) list.push_back(services::to_json(s));
  return ToolOutput{json{{"sandbox_id", *id}, {"services", std::move(list)}}};
}

Result<ToolOutput> service_restart(CallContext& ctx, sbx::SandboxManager& m, services::ServiceHost& services,
                                   const json& args) {
  auto id = live_sandbox(ctx, m, args);
  if (!id) return std::unexpected(id.error());
  auto r = services.restart(ctx.session->principal(), *id, args.at("name").get<std::string>(), ctx.stop);
  if (!r) return std::unexpected(r.error());
  return ToolOutput{json{{"sandbox_id", *id}, {"service", services::to_json(*r)}}};
}

}  // namespace

void register_service_tools(ToolRegistry& registry, sbx::SandboxManager& m, services::ServiceHost& services) {
  registry.add("service_list", redacting(m, [&services](CallContext& ctx, sbx::SandboxManager& mm, const json& args) {
                 return service_list(ctx, mm, services, args);
               }));
  registry.add("service_restart", redacting(m, [&services](CallContext& ctx, sbx::SandboxManager& mm, const json& args) {
                 return service_restart(ctx, mm, services, args);
               }));
}

}  // namespace kiln::server
