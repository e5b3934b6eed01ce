// Shared by the sandbox tool files: a wrapper that binds a handler to the sandbox engine and
// passes its result and its error text through the secret redactor.
#pragma once

#include "sandbox/manager.h"
#include "mcp/tool_registry.h"

namespace kiln::services { class ServiceHost; }

namespace kiln::server {

// Arguments that describe a sandbox rather than one exec (sandbox_create, and sandbox_exec without
// sandbox_id); the secret preflight reads the same ones.
inline constexpr const char* kPolicyArgs[] = {"network", "limits", "secrets", "isolation"};

template <class F>
ToolHandler redacting(sandbox::SandboxManager& m, F f) {
  return [&m, f](CallContext& ctx, const nlohmann::json& args) -> Result<ToolOutput> {
    auto r = f(ctx, m, args);
    if (!r) return fail(r.error().code, m.redact(r.error().message));
    m.redact_json(r->structured);
    return r;
  };
}

// {name, version} of the session's client (from initialize), for trace records.
nlohmann::json client_json(const CallContext& ctx);

void register_process_tools(ToolRegistry& registry, sandbox::SandboxManager& m);
// service_list, service_restart (tools/services.cpp)
void register_service_tools(ToolRegistry& registry, sandbox::SandboxManager& m, services::ServiceHost& services);

}  // namespace kiln::server
