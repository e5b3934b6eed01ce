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

Result<ToolOutput> service_list(CallContext& ctx, sbx::SandboxManager& m, services::ServiceHost& services,
                                const json& args) {
  const std::string id = args.at("sandbox_id");
  const std::string owner = ctx.session->principal();
  if (!m.policy_of(owner, id))
    return fail(Errc::not_found, fmt::format("no live sandbox '{}': call sandbox_list to see the live ones", id));
  json list = json::array();
  for (const auto& s : services.list(owner, id)) list.push_back(services::to_json(s));
  return ToolOutput{json{{"sandbox_id", id}, {"services", std::move(list)}}};
}

Result<ToolOutput> service_restart(CallContext& ctx, sbx::SandboxManager& m, services::ServiceHost& services,
                                   const json& args) {
  const std::string id = args.at("sandbox_id");
  const std::string owner = ctx.session->principal();
  if (!m.policy_of(owner, id))
    return fail(Errc::not_found, fmt::format("no live sandbox '{}': call sandbox_list to see the live ones", id));
  auto r = services.restart(owner, id, args.at("name").get<std::string>(), ctx.stop);
  if (!r) return std::unexpected(r.error());
  return ToolOutput{json{{"sandbox_id", id}, {"service", services::to_json(*r)}}};
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
