// Schedules: each fire a foreground run in the app's environment (its files, data and services;
// brought up for the run when the web process sleeps), traced with kind "schedule". A schedule
// never overlaps itself: a fire while its last run still goes is skipped and counted.
#include "serve/app_impl.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "runs/run_tracing.h"
#include "sandbox/manager.h"

namespace kiln::server::apps {

using nlohmann::json;
namespace sbx = kiln::sandbox;

void Supervisor::Impl::tick_schedules(const std::shared_ptr<App>& app, std::int64_t now) {
  std::vector<std::string> due;
  {
    std::lock_guard lock(app->mu);
    if (app->removed) return;
    for (auto& [name, s] : app->schedules) {
      if (!s.spec) continue;
      // The latest fire since the last check: after downtime, many missed fires make one run.
      auto fire = latest_fire_between(*s.spec, s.checked_at, now);
      if (!fire) continue;
      s.checked_at = now;
      if (s.running) {
        ++s.skipped;
        spdlog::info("apps: {} schedule {} skipped: its previous run is still going", app->name, name);
      } else {
        due.push_back(name);
        s.running = true;  // claimed here, so the next tick cannot start it twice
      }
      save_schedule(*app, s);
    }
  }
  auto self = shared_from_this();
  for (auto& name : due)
    spawn([self, app, name](std::stop_token) {
      auto r = self->run_schedule(app, name, true);
      if (!r) spdlog::warn("apps: {} schedule {}: {}", app->name, name, r.error().message);
    });
}

Result<json> Supervisor::Impl::run_schedule(const std::shared_ptr<App>& app, const std::string& name, bool claimed) {
  ScheduleConfig config;
  std::string workspace_id;
  int version;
  json network;
  {
    std::lock_guard lock(app->mu);
    auto it = app->schedules.find(name);
    if (it == app->schedules.end()) {
      std::string names;
      for (const auto& [n, s] : app->schedules) names += (names.empty() ? "" : ", ") + n;
      return fail(Errc::not_found, names.empty() ? fmt::format("app {} has no schedules in its kiln.json", app->name)
                                                 : fmt::format("app {} has no schedule {}; its schedules: {}",
                                                               app->name, name, names));
    }
    if (!claimed) {
      if (it->second.running)
        return json{{"status", "skipped"}, {"reason", "its previous run is still going"}, {"trace_id", nullptr},
                    {"at", iso_time(now_s())}};
      it->second.running = true;
    }
    config = it->second.config;
    network = network_report(app->config);
    workspace_id = app->workspace_id;
    version = app->version;
  }
  auto finish = [&](const std::string& trace_id, const std::string& status) {
    std::lock_guard lock(app->mu);
    auto it = app->schedules.find(name);
    if (it == app->schedules.end()) return;
    it->second.running = false;
    if (!trace_id.empty()) {
      it->second.last_trace_id = trace_id;
      it->second.last_status = status;
      it->second.last_at = iso_time(now_s());
      save_schedule(*app, it->second);
    }
    app->cv.notify_all();
  };
  {
    std::lock_guard op(app->op_mu);
    if (auto ok = bring_up(*app, false, {}); !ok) {
      finish("", "");
      return std::unexpected(ok.error());
    }
    std::lock_guard lock(app->mu);
    ++app->env_users;
  }
  std::string sandbox_id;
  {
    std::lock_guard lock(app->mu);
    sandbox_id = app->sandbox_id;
  }
  sbx::ExecRequest req;
  req.owner = opt.principal;
  req.argv = config.argv;
  req.display_command = config.display;
  req.cwd = fmt::format("{}/versions/{}", app_dir(app->name), version);
  req.timeout_s = config.timeout_s;
  std::string trace_id;
  if (opt.tracer) {
    auto info = trace_info("schedule", workspace_id, name,
                           json{{"app", app->name}, {"schedule", name}, {"cron", config.cron}, {"version", version},
                                {"sandbox_id", sandbox_id}, {"network", network}});
    if (auto id = opt.tracer->attach(req, info)) trace_id = *id;
  }
  const auto at = iso_time(now_s());
  auto r = opt.sandboxes->exec(sandbox_id, nullptr, std::move(req));
  {
    std::lock_guard op(app->op_mu);
    bool sleep;
    {
      std::lock_guard lock(app->mu);
      --app->env_users;
      sleep = app->state != AppState::running && app->state != AppState::starting && app->env_users == 0;
    }
    if (sleep) bring_down(*app, true);
  }
  if (!r) {
    finish(trace_id, "error");
    return std::unexpected(r.error());
  }
  const std::string status = trace_status_of(*r);
  finish(trace_id, status);
  return json{{"artifact", app->name},
              {"schedule", name},
              {"trace_id", trace_id.empty() ? json(nullptr) : json(trace_id)},
              {"status", status},
              {"exit_code", r->exit_code ? json(*r->exit_code) : json(nullptr)},
              {"stop_reason", sbx::to_string(r->stop_reason)},
              {"duration_ms", r->duration_ms},
              {"stdout_tail", r->out.text},
              {"stderr_tail", r->err.text},
              {"at", at}};
}

}  // namespace kiln::server::apps
