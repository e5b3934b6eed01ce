// The composition of kiln serve's app side (see app_runtime.h).
#include "cli/app_runtime.h"

#include <chrono>

#include "cli/process_setup.h"
#include "mcp/http/token.h"
#include "mcp/principal.h"
#include "runs/run_tracing.h"
#include "runs/trace_hub.h"
#include "sandbox/manager.h"
#include "serve/app_control.h"
#include "serve/app_front_door.h"
#include "serve/app_supervisor.h"
#include "serve/secret_page.h"
#include "services/service_host.h"
#include "traces/trace_store.h"

namespace kiln::cli {

// Member order is construction order (and the reverse is destruction order).
struct AppRuntime {
  std::unique_ptr<sandbox::SandboxManager> sandboxes;
  std::unique_ptr<traces::TraceStore> traces;
  server::TraceHub hub;
  std::unique_ptr<server::RunTracer> tracer;
  std::unique_ptr<services::ServiceHost> services;
  std::unique_ptr<server::apps::Supervisor> supervisor;
  std::unique_ptr<server::secrets::SecretRequests> secret_pages;
  std::string token;
};

Result<AppRuntime*> open_app_runtime(const AppRuntimeOptions& options) {
  auto rt = std::make_unique<AppRuntime>();
  sandbox::ManagerOptions so;
  so.state_dir = options.state_dir;
  so.helper_path = default_helper_path();
  so.allow_unsandboxed = options.allow_unsandboxed;
  so.idle_timeout = std::chrono::hours(24 * 365);  // the supervisor decides when an app sleeps
  so.warm_spares = false;
  so.ceilings = options.ceilings;
  rt->sandboxes = std::make_unique<sandbox::SandboxManager>(so);
  auto traces = traces::TraceStore::open(options.state_dir);
  if (!traces) return std::unexpected(traces.error());
  rt->traces = std::move(*traces);
  rt->tracer = std::make_unique<server::RunTracer>(*rt->traces, &rt->hub, rt->sandboxes.get());
  rt->services = std::make_unique<services::ServiceHost>(*rt->sandboxes, rt->tracer.get(), options.state_dir);
  auto token = server::ensure_default_token(options.state_dir);
  if (!token) return std::unexpected(token.error());
  rt->token = *token;
  server::apps::SupervisorOptions ao;
  ao.state_dir = options.state_dir;
  ao.principal = server::local_principal();
  ao.store = options.store;
  ao.sandboxes = rt->sandboxes.get();
  ao.services = rt->services.get();
  ao.tracer = rt->tracer.get();
  auto sup = server::apps::Supervisor::open(ao);
  if (!sup) return std::unexpected(sup.error());
  rt->supervisor = std::move(*sup);
  rt->secret_pages = std::make_unique<server::secrets::SecretRequests>(options.state_dir);
  return rt.release();
}

Result<void> attach_apps(AppRuntime& rt, server::http::ServerOptions& so, server::http::RouterContext& ctx) {
  ctx.is_app = [sup = rt.supervisor.get()](std::string_view name) { return sup->is_app(name); };
  so.proxy = server::apps::app_route(*rt.supervisor, ctx);
  so.endpoints.push_back(server::apps::control_endpoint(*rt.supervisor, rt.token, rt.secret_pages.get()));
  so.endpoints.push_back(server::secrets::secret_page_endpoint(*rt.secret_pages));
  return {};
}

void start_apps(AppRuntime& rt, const std::string& base_url) {
  rt.supervisor->set_base_url(base_url);
  rt.secret_pages->set_base_url(base_url);
  rt.supervisor->start();
}

void stop_apps(AppRuntime& rt) {
  rt.supervisor->shutdown();
  rt.sandboxes->shutdown();
}

}  // namespace kiln::cli
