// The supervisor's public face and its clock: which apps exist, requests waiting for an app, and the
// once-a-second tick that sleeps idle apps and restarts crashed ones (the control operations are
// app_operations.cpp).
#include "serve/app_supervisor.h"
#include "serve/app_impl.h"
#include "serve/app_network.h"

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "artifacts/artifact_store.h"
#include "sandbox/manager.h"

namespace kiln::server::apps {

using nlohmann::json;

namespace {

constexpr int kMaxBackoffS = 60;
constexpr std::size_t kMaxIdleFds = 32;

}  // namespace

const char* to_string(AppState s) {
  switch (s) {
    case AppState::starting: return "starting";
    case AppState::running: return "running";
    case AppState::sleeping: return "sleeping";
    case AppState::crashed: return "crashed";
    case AppState::stopped: return "stopped";
  }
  return "stopped";
}

std::int64_t now_s() { return std::int64_t(std::time(nullptr)); }
std::int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
std::string iso_time(std::int64_t t) {
  if (t <= 0) return {};
  std::time_t tt = t;
  std::tm tm{};
  ::gmtime_r(&tt, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

Supervisor::Supervisor(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
Supervisor::~Supervisor() { shutdown(); }

Result<std::unique_ptr<Supervisor>> Supervisor::open(SupervisorOptions options) {
  auto impl = std::make_shared<Impl>();
  impl->opt = std::move(options);
  std::error_code ec;
  std::filesystem::create_directories(impl->opt.state_dir + "/apps", ec);
  if (ec) return fail(Errc::io, fmt::format("cannot create {}/apps: {}", impl->opt.state_dir, ec.message()));
  if (auto ok = impl->open_db(); !ok) return std::unexpected(ok.error());
  // A sandbox that is gone (its helper killed from outside, a limit) takes the app's environment
  // with it: the next start makes a new one.
  impl->opt.sandboxes->on_sandbox_gone([weak = std::weak_ptr<Impl>(impl)](const std::string& id) {
    auto self = weak.lock();
    if (!self) return;
    std::lock_guard lock(self->mu);
    for (auto& [name, app] : self->apps) {
      std::lock_guard al(app->mu);
      if (app->sandbox_id != id) continue;
      app->env_up = false;
      app->sandbox_id.clear();
      app->idle_fds.clear();
    }
  });
  return std::unique_ptr<Supervisor>(new Supervisor(std::move(impl)));
}

std::shared_ptr<App> Supervisor::Impl::find(std::string_view name) const {
  std::lock_guard lock(mu);
  auto it = apps.find(name);
  return it == apps.end() ? nullptr : it->second;
}

Result<std::shared_ptr<App>> Supervisor::Impl::load(const std::string& name) {
  auto info = opt.store->get(name);
  if (!info) return std::unexpected(info.error());
  auto forget_it = [&]() -> Result<std::shared_ptr<App>> {
    {
      std::lock_guard lock(names_mu);
      app_names.erase(name);
    }
    return nullptr;
  };
  if (!*info || !(*info)->is_app()) return forget_it();
  const auto& v = (*info)->versions.back();
  auto cfg = app_config_from_json(v.app->value("app", json::object()));
  if (!cfg) return fail(cfg.error().code, fmt::format("app {} version {}: {}", name, v.number, cfg.error().message));
  std::vector<ServiceConfig> services;
  for (const auto& s : v.app->value("services", json::array())) {
    auto sc = service_config_from_json(s);
    if (!sc) return fail(sc.error().code, fmt::format("app {} version {}: {}", name, v.number, sc.error().message));
    services.push_back(std::move(*sc));
  }
  std::shared_ptr<App> app;
  {
    std::lock_guard lock(mu);
    auto& slot = apps[name];
    if (!slot) {
      slot = std::make_shared<App>();
      slot->name = name;
    }
    app = slot;
  }
  bool fresh;
  {
    std::lock_guard lock(app->mu);
    fresh = app->version == 0;
    app->workspace_id = (*info)->workspace_id;
    app->removed = false;
    if (app->version != v.number) {
      app->version = v.number;
      app->config = std::move(*cfg);
      app->services = std::move(services);
      // Loopback inside the sandbox is the app's own; pick a port its services do not use.
      app->port = 8080;
      for (bool clash = true; clash;) {
        clash = false;
        for (const auto& s : app->services)
          if (s.port == app->port) clash = true, ++app->port;
      }
      std::map<std::string, ScheduleRecord> kept;
      for (const auto& sc : app->config.schedules) {
        ScheduleRecord r;
        if (auto old = app->schedules.find(sc.name); old != app->schedules.end()) r = old->second;
        r.config = sc;
        auto spec = parse_cron(sc.cron);
        r.spec = spec ? std::optional<CronSpec>(*spec) : std::nullopt;
        r.spec_error = spec ? "" : spec.error().message;
        if (r.checked_at == 0) r.checked_at = now_s();
        kept[sc.name] = std::move(r);
      }
      app->schedules = std::move(kept);
    }
  }
  if (fresh) load_saved(*app);
  {
    std::lock_guard lock(names_mu);
    app_names.insert(name);
  }
  return app;
}

Result<std::shared_ptr<App>> Supervisor::Impl::known_app(const std::string& name) {
  auto app = find(name);
  if (!app) {
    auto loaded = load(name);
    if (!loaded) return std::unexpected(loaded.error());
    app = *loaded;
  }
  if (!app) return fail(Errc::not_found, fmt::format("artifact {} is not an app; publish it with app: true", name));
  return app;
}

void Supervisor::Impl::spawn(std::function<void(std::stop_token)> work) {
  std::lock_guard lock(threads_mu);
  if (stopping) return;
  // Finished threads are joined here, so the list stays as long as the work in flight.
  std::erase_if(threads, [](std::jthread& t) { return !t.joinable(); });
  threads.emplace_back([work = std::move(work)](std::stop_token st) { work(st); });
}

json Supervisor::Impl::network_report(const AppConfig& config) const {
  return app_network_report(config, opt.sandboxes ? opt.sandboxes->options().network_ceiling : std::nullopt);
}

json Supervisor::Impl::status_json(const App& a) const {
  json schedules = json::array();
  const auto now = now_s();
  for (const auto& [name, s] : a.schedules) {
    json j = {{"name", name}, {"cron", s.config.cron}, {"next_run_at", nullptr}, {"last_run", nullptr},
              {"running", s.running}};
    if (s.spec)
      if (auto next = next_fire(*s.spec, std::max(now, s.checked_at))) j["next_run_at"] = iso_time(*next);
    if (!s.spec_error.empty()) j["error"] = s.spec_error;
    if (!s.last_trace_id.empty())
      j["last_run"] = {{"trace_id", s.last_trace_id}, {"status", s.last_status}, {"at", s.last_at}};
    if (s.skipped) j["skipped"] = s.skipped;
    schedules.push_back(std::move(j));
  }
  json j = {{"artifact", a.name},
            {"state", to_string(a.state)},
            {"version", a.version},
            {"url", opt.base_url + "/a/" + a.name + "/"},
            {"started_at", a.started_at ? json(iso_time(a.started_at)) : json(nullptr)},
            {"last_request_at", a.last_request_at ? json(iso_time(a.last_request_at)) : json(nullptr)},
            {"restarts", a.restarts},
            {"idle_s", a.config.idle_s},
            {"schedules", std::move(schedules)},
            {"trace_id", a.web_trace_id.empty() ? json(nullptr) : json(a.web_trace_id)},
            {"data_dir", app_dir(a.name) + "/data"},
            {"network", network_report(a.config)}};
  if (!a.last_error.empty()) j["last_error"] = a.last_error;
  if (a.state == AppState::crashed && a.retry_at) j["next_start_at"] = iso_time(a.retry_at);
  return j;
}

// Hands every waiting request what it gets now: a connection when the app runs, an error page
// when it crashed or stopped; waiters of a starting app stay until it is up or their time is out.
void Supervisor::Impl::answer_waiters(App& app, std::unique_lock<std::mutex>& lock) {
  auto waiters = std::move(app.waiters);
  app.waiters.clear();
  const AppState state = app.state;
  const std::string error = app.last_error;
  const int retry = app.state == AppState::crashed ? int(std::max<std::int64_t>(1, app.retry_at - now_s())) : 5;
  const int wait_s = int(app.config.request_timeout_s);
  if (state == AppState::starting) {
    const auto now = now_ms();
    for (auto& w : waiters) {
      if (w.deadline_ms > now) {
        app.waiters.push_back(std::move(w));
        continue;
      }
      lock.unlock();
      Upstream u;
      u.status = 503;
      u.why = "The app is starting and did not answer in time. Try again in a few seconds.";
      u.retry_after_s = 5;
      w.ready(std::move(u));
      lock.lock();
    }
    return;
  }
  lock.unlock();
  for (auto& w : waiters) {
    Upstream u;
    u.max_wait_s = wait_s;
    if (state == AppState::running) {
      auto fd = connect(app, std::chrono::milliseconds(2000));
      if (fd) {
        u.fd = http::UpstreamSocket(std::move(*fd));
        std::lock_guard l(app.mu);
        ++app.in_flight;
        app.last_request_at = now_s();
      } else {
        u.status = 502;
        u.why = "The app is not accepting connections: " + fd.error().message;
      }
    } else if (state == AppState::crashed) {
      u.status = 502;
      u.why = "The app crashed and is being restarted" + (error.empty() ? "." : ": " + error);
      u.retry_after_s = retry;
    } else {
      u.status = 503;
      u.why = state == AppState::stopped ? "The app is stopped." : "The app could not be woken up.";
      u.retry_after_s = retry;
    }
    w.ready(std::move(u));
  }
  lock.lock();
}

void Supervisor::set_base_url(std::string url) { impl_->opt.base_url = std::move(url); }

void Supervisor::start() {
  auto self = impl_;
  auto all = self->opt.store->list("");
  if (!all) {
    spdlog::error("apps: cannot list artifacts: {}", all.error().message);
  } else {
    for (const auto& a : *all) {
      if (!a.is_app()) continue;
      auto app = self->load(a.name);
      if (!app || !*app) {
        if (!app) spdlog::error("apps: {}", app.error().message);
        continue;
      }
      bool wake;
      {
        std::lock_guard lock((*app)->mu);
        wake = (*app)->config.idle_s == 0 || self->was_awake(a.name);
      }
      if (wake) {
        std::shared_ptr<App> ap = *app;
        {
          std::lock_guard lock(ap->mu);
          ap->start_pending = true;
        }
        self->spawn([self, ap](std::stop_token st) {
          std::lock_guard op(ap->op_mu);
          if (auto ok = self->bring_up(*ap, true, st); !ok) spdlog::warn("apps: {} did not come back: {}", ap->name, ok.error().message);
        });
      }
    }
  }
  self->ticker = std::jthread([self](std::stop_token st) {
    while (!st.stop_requested()) {
      std::mutex m;
      std::condition_variable_any cv;
      std::unique_lock lock(m);
      cv.wait_for(lock, st, std::chrono::seconds(1), [] { return false; });
      if (st.stop_requested()) break;
      self->tick();
    }
  });
}

void Supervisor::shutdown() {
  auto& s = *impl_;
  if (s.stopping.exchange(true)) return;
  if (s.ticker.joinable()) {
    s.ticker.request_stop();
    s.ticker.join();
  }
  std::vector<std::jthread> threads;
  {
    std::lock_guard lock(s.threads_mu);
    threads = std::move(s.threads);
  }
  for (auto& t : threads) t.request_stop();
  threads.clear();  // joins
  std::vector<std::shared_ptr<App>> all;
  {
    std::lock_guard lock(s.mu);
    for (auto& [n, a] : s.apps) all.push_back(a);
  }
  for (auto& a : all) {
    std::lock_guard op(a->op_mu);
    s.bring_down(*a, true);
  }
}

bool Supervisor::is_app(std::string_view name) const {
  std::shared_lock lock(impl_->names_mu);
  return impl_->app_names.contains(name);
}

bool Supervisor::running(std::string_view name) const {
  auto app = impl_->find(name);
  if (!app) return false;
  std::lock_guard lock(app->mu);
  return app->state == AppState::running;
}

void Supervisor::acquire(const std::string& name, std::function<void(Upstream)> ready) {
  auto self = impl_;
  auto app = self->find(name);
  if (!app) {
    Upstream u;
    u.status = 404;
    u.why = "There is no app published at this address.";
    ready(std::move(u));
    return;
  }
  std::unique_lock lock(app->mu);
  if (app->removed || self->stopping) {
    lock.unlock();
    Upstream u;
    u.status = 503;
    u.why = "The app is stopped.";
    ready(std::move(u));
    return;
  }
  // Requests waiting for a waking app count too: a burst must not all be let through at once.
  if (app->in_flight + int(app->waiters.size()) >= app->config.max_connections) {
    lock.unlock();
    Upstream u;
    u.status = 503;
    u.why = "The app has as many requests in flight as it allows (max_connections). Try again shortly.";
    u.retry_after_s = 1;
    ready(std::move(u));
    return;
  }
  app->last_request_at = now_s();
  if (app->state == AppState::running) {
    http::UpstreamSocket fd;
    if (!app->idle_fds.empty()) {
      // The latest socket this io thread parked, else the latest of any (see parked_here).
      auto mine = std::find_if(app->idle_fds.rbegin(), app->idle_fds.rend(),
                               [](const http::UpstreamSocket& s) { return s.parked_here(); });
      auto pick = mine == app->idle_fds.rend() ? app->idle_fds.end() - 1 : std::prev(mine.base());
      fd = std::move(*pick);
      app->idle_fds.erase(pick);
    }
    ++app->in_flight;
    const int wait_s = int(app->config.request_timeout_s);
    lock.unlock();
    Upstream u;
    u.max_wait_s = wait_s;
    u.reused = bool(fd);
    if (!fd) {
      auto c = self->connect(*app, std::chrono::milliseconds(2000));
      if (!c) {
        std::lock_guard l(app->mu);
        --app->in_flight;
        u.status = 502;
        u.why = "The app is not accepting connections: " + c.error().message;
        ready(std::move(u));
        return;
      }
      fd = http::UpstreamSocket(std::move(*c));
    }
    u.fd = std::move(fd);
    ready(std::move(u));
    return;
  }
  if (app->state == AppState::crashed) {
    const int retry = int(std::max<std::int64_t>(1, app->retry_at - now_s()));
    const std::string error = app->last_error;
    lock.unlock();
    Upstream u;
    u.status = 502;
    u.why = "The app crashed and is being restarted" + (error.empty() ? "." : ": " + error);
    u.retry_after_s = retry;
    ready(std::move(u));
    return;
  }
  // Sleeping, stopped or starting: wait for it (the tick answers waiters whose time is out).
  app->waiters.push_back({std::move(ready), now_ms() + std::int64_t(app->config.start_timeout_s * 1000)});
  if (app->state != AppState::starting && !app->start_pending) {
    app->start_pending = true;
    lock.unlock();
    self->spawn([self, app](std::stop_token st) {
      std::lock_guard op(app->op_mu);
      if (auto ok = self->bring_up(*app, true, st); !ok) spdlog::warn("apps: waking {} failed: {}", app->name, ok.error().message);
    });
  }
}

Result<UniqueFd> Supervisor::reconnect(const std::string& name) {
  auto app = impl_->find(name);
  if (!app) return fail(Errc::not_found, "the app was unpublished");
  {
    std::lock_guard lock(app->mu);
    if (app->state != AppState::running) return fail(Errc::conflict, "the app is not running");
  }
  return impl_->connect(*app, std::chrono::milliseconds(2000));
}

void Supervisor::release(const std::string& name, http::UpstreamSocket reusable, bool upstream_failed) {
  auto app = impl_->find(name);
  if (!app) return;
  std::lock_guard lock(app->mu);
  if (app->in_flight > 0) --app->in_flight;
  app->last_request_at = now_s();
  if (reusable && !upstream_failed && app->state == AppState::running && app->idle_fds.size() < kMaxIdleFds)
    app->idle_fds.push_back(std::move(reusable));
}

void Supervisor::Impl::tick() {
  std::vector<std::shared_ptr<App>> all;
  {
    std::lock_guard lock(mu);
    for (auto& [n, a] : apps) all.push_back(a);
  }
  const auto now = now_s();
  for (auto& app : all) {
    std::unique_lock lock(app->mu);
    if (app->removed) continue;
    if (!app->waiters.empty()) answer_waiters(*app, lock);
    const bool idle = app->state == AppState::running && app->config.idle_s > 0 && app->in_flight == 0 &&
                      now - std::max(app->last_request_at, app->started_at) >= app->config.idle_s;
    const bool restart = app->state == AppState::crashed && app->retry_at && now >= app->retry_at && !app->start_pending;
    if (restart) app->start_pending = true;
    lock.unlock();
    auto self = shared_from_this();
    if (idle) {
      spawn([self, app](std::stop_token) {
        std::lock_guard op(app->op_mu);
        {
          std::lock_guard l(app->mu);
          // A request may have arrived while this thread started.
          if (app->state != AppState::running || app->in_flight > 0 ||
              now_s() - std::max(app->last_request_at, app->started_at) < app->config.idle_s)
            return;
        }
        spdlog::info("apps: {} idle for {} s, going to sleep", app->name, app->config.idle_s);
        self->bring_down(*app, true);
      });
    } else if (restart) {
      spawn([self, app](std::stop_token st) {
        std::lock_guard op(app->op_mu);
        if (auto ok = self->bring_up(*app, true, st); !ok) spdlog::warn("apps: restarting {} failed: {}", app->name, ok.error().message);
      });
    }
    tick_schedules(app, now);
  }
}

}  // namespace kiln::server::apps
