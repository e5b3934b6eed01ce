// What `kiln serve` needs to run apps, wired once: a sandbox manager of its own (app sandboxes
// live for weeks, so no idle reaping and no warm spares), the trace store and tracer, the service
// host, and the supervisor with its front door and control endpoint.
#pragma once

#include <memory>
#include <string>

#include "core/error.h"
#include "http/server.h"
#include "sandbox/host_budget.h"

namespace kiln::artifacts { class ArtifactStore; }
namespace kiln::server::http { struct RouterContext; }

namespace kiln::cli {

struct AppRuntime;

struct AppRuntimeOptions {
  std::string state_dir;
  artifacts::ArtifactStore* store = nullptr;
  sandbox::HostCeilings ceilings;
  bool allow_unsandboxed = false;
};

// Never destroyed before the process ends its server: the listener's route holds references.
Result<AppRuntime*> open_app_runtime(const AppRuntimeOptions& options);
// Adds the app route, the control endpoint and the one-time secret pages (serve/secret_page.h)
// to the listener's options, and tells the router which artifacts are apps.
Result<void> attach_apps(AppRuntime& rt, server::http::ServerOptions& so, server::http::RouterContext& ctx);
// After the bind: the URL apps and secret pages are reached at; then loads the apps and starts the awake ones.
void start_apps(AppRuntime& rt, const std::string& base_url);
// Stops every app cleanly (their data stays).
void stop_apps(AppRuntime& rt);

}  // namespace kiln::cli
