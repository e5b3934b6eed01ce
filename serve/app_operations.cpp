// The supervisor's control operations (the control API's ops: status, list, deploy, restart,
// schedule_run, stop): each takes an app's op_mu for what it changes, so none interleaves with a
// wake, a sleep or another operation.
#include "serve/app_supervisor.h"
#include "serve/app_impl.h"

#include <filesystem>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace kiln::server::apps {

using nlohmann::json;

Result<json> Supervisor::status(const std::string& name) {
  auto found = impl_->known_app(name);
  if (!found) return std::unexpected(found.error());
  auto app = *found;
  std::lock_guard lock(app->mu);
  return impl_->status_json(*app);
}

json Supervisor::list() {
  json out = json::array();
  std::vector<std::shared_ptr<App>> all;
  {
    std::lock_guard lock(impl_->mu);
    for (auto& [n, a] : impl_->apps) all.push_back(a);
  }
  for (auto& a : all) {
    std::lock_guard lock(a->mu);
    if (!a->removed) out.push_back(impl_->status_json(*a));
  }
  return json{{"apps", std::move(out)}};
}

Result<json> Supervisor::deploy(const std::string& name) {
  auto loaded = impl_->load(name);
  if (!loaded) return std::unexpected(loaded.error());
  auto app = *loaded;
  if (!app) return fail(Errc::not_found, fmt::format("artifact {} is not an app; publish it with app: true", name));
  {
    std::lock_guard op(app->op_mu);
    bool current;
    {
      std::lock_guard lock(app->mu);
      // The running web process serves an older version: swap it for the new files, same data.
      current = app->state == AppState::running && app->env_up;
      app->start_pending = true;
      app->backoff_s = 1;
    }
    if (current) impl_->bring_down(*app, true);
    auto ok = impl_->bring_up(*app, true, {});
    if (!ok) spdlog::warn("apps: deploying {} failed: {}", name, ok.error().message);
  }
  std::lock_guard lock(app->mu);
  return impl_->status_json(*app);
}

Result<json> Supervisor::restart(const std::string& name) {
  auto app = impl_->find(name);
  if (!app) return status(name);  // the not-an-app answer
  {
    std::lock_guard op(app->op_mu);
    impl_->bring_down(*app, false);
    {
      std::lock_guard lock(app->mu);
      app->start_pending = true;
      app->backoff_s = 1;
    }
    if (auto ok = impl_->bring_up(*app, true, {}); !ok) spdlog::warn("apps: restarting {} failed: {}", name, ok.error().message);
  }
  std::lock_guard lock(app->mu);
  return impl_->status_json(*app);
}

Result<json> Supervisor::run_schedule(const std::string& name, const std::string& schedule) {
  auto found = impl_->known_app(name);
  if (!found) return std::unexpected(found.error());
  auto app = *found;
  return impl_->run_schedule(app, schedule, false);
}

Result<json> Supervisor::stop(const std::string& name, bool delete_data) {
  auto app = impl_->find(name);
  bool stopped = false;
  if (app) {
    std::lock_guard op(app->op_mu);
    {
      std::lock_guard lock(app->mu);
      app->removed = true;
    }
    impl_->bring_down(*app, true);
    std::unique_lock lock(app->mu);
    app->state = AppState::stopped;
    impl_->answer_waiters(*app, lock);
    stopped = true;
  }
  {
    std::lock_guard lock(impl_->names_mu);
    impl_->app_names.erase(name);
  }
  bool deleted = false;
  if (delete_data) {
    std::error_code ec;
    std::filesystem::remove_all(impl_->app_dir(name), ec);
    if (ec) return fail(Errc::io, fmt::format("could not delete the data of app {}: {}", name, ec.message()));
    deleted = true;
    impl_->forget(name);
    std::lock_guard lock(impl_->mu);
    impl_->apps.erase(name);
  }
  return json{{"stopped", stopped}, {"data_deleted", deleted},
              {"data_dir", deleted ? json(nullptr) : json(impl_->app_dir(name) + "/data")}};
}

}  // namespace kiln::server::apps
