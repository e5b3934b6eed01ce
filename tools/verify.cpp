// The verify tool: decode, run the engine (verify/verify_runner.cpp) with MCP progress, encode.

#include "runs/run_tracing.h"
#include "mcp/session_state.h"
#include "mcp/tool_registry.h"
#include "tools/secret_prompt.h"
#include "tools/sandbox_common.h"
#include "tools/traces.h"
#include "verify/verify_runner.h"
#include "workspace/state_store.h"

namespace kiln::server {

using nlohmann::json;

namespace {

Result<ToolOutput> verify(CallContext& ctx, RunTracer& tracer, sandbox::SandboxManager& m,
                          services::ServiceHost* services, const json& args) {
  auto ws = ctx.session->workspace_for(args);
  if (!ws) return std::unexpected(ws.error());
  VerifyTarget target{(*ws)->id, (*ws)->name, (*ws)->root, ctx.session->store().dir()};
  VerifyRequest req;
  if (args.contains("checks"))
    for (const auto& c : args["checks"]) req.only.push_back(c.get<std::string>());
  req.client = client_json(ctx);
  req.principal = ctx.session->principal();
  req.stop = ctx.stop;
  req.services = services;
  if (ctx.progress_token && ctx.progress)
    req.progress = [&ctx](double done, double total, const std::string& msg) { ctx.progress(done, total, msg); };
  auto r = run_verify(tracer, m, target, req);
  if (!r) return fail(r.error().code, m.redact(r.error().message));
  return ToolOutput{std::move(*r)};
}

}  // namespace

void register_verify_tool(ToolRegistry& registry, RunTracer& tracer, sandbox::SandboxManager& m,
                          services::ServiceHost* services) {
  registry.add("verify", [&tracer, &m, services](CallContext& ctx, const json& args) {
    return verify(ctx, tracer, m, services, args);
  });
  registry.set_preflight("verify", secret_preflight(false));
}

}  // namespace kiln::server
