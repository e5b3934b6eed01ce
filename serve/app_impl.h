// The supervisor's records, shared by its .cpp files only: one App per app artifact, guarded by its
// own mutex, with lifecycle operations serialised by op_mu so a wake, a sleep and a restart never
// interleave.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <string>
#include <thread>
#include <vector>

#include "db/database.h"
#include "runs/run_tracing.h"
#include "serve/app_supervisor.h"
#include "serve/cron.h"
#include "serve/work_queue.h"
#include "workspace/kiln_config.h"

namespace kiln::server::apps {

enum class AppState { starting, running, sleeping, crashed, stopped };
const char* to_string(AppState s);

struct ScheduleRecord {
  ScheduleConfig config;
  std::optional<CronSpec> spec;  // nullopt: the expression no longer parses (reported in status)
  std::string spec_error;
  std::int64_t checked_at = 0;   // fires at or before this were handled (persisted)
  bool running = false;
  int skipped = 0;
  std::string last_trace_id, last_status, last_at;
};

struct App {
  std::string name;
  std::string workspace_id;

  std::mutex op_mu;  // held for a whole bring-up, sleep, restart or stop

  mutable std::mutex mu;  // everything below
  int version = 0;
  AppConfig config;
  std::vector<ServiceConfig> services;
  AppState state = AppState::sleeping;
  bool env_up = false;       // sandbox and services exist
  int env_users = 0;         // schedule runs and exports holding the environment up
  std::string sandbox_id;
  int port = 8080;
  int generation = 0;        // of the web process: callbacks of an earlier one are ignored
  std::string web_run_id, web_trace_id;
  std::int64_t started_at = 0, last_request_at = 0;
  int restarts = 0;
  int backoff_s = 1;
  std::int64_t retry_at = 0;  // crashed: when the next start is due
  std::string last_error;
  bool start_pending = false;  // a bring-up thread is on its way
  bool removed = false;        // stopped for unpublish: never woken again
  int in_flight = 0;
  std::vector<http::UpstreamSocket> idle_fds;  // kept registered with the listener by the proxy
  struct Waiter {
    std::function<void(Upstream)> ready;
    std::int64_t deadline_ms;
  };
  std::deque<Waiter> waiters;
  std::map<std::string, ScheduleRecord> schedules;
  std::condition_variable cv;  // state changes (waits for running, for a schedule to end)
};

std::int64_t now_s();
std::int64_t now_ms();
std::string iso_time(std::int64_t unix_s);

struct Supervisor::Impl : std::enable_shared_from_this<Supervisor::Impl> {
  SupervisorOptions opt;
  db::Database db;  // <state>/apps.db: what must survive a restart of kiln serve
  std::mutex db_mu;

  mutable std::mutex mu;  // the map, threads
  std::map<std::string, std::shared_ptr<App>, std::less<>> apps;
  std::set<std::string, std::less<>> app_names;  // is_app() reads this under names_mu
  // Shared for is_app(): every request to kiln serve asks it, from both io threads at once, and
  // an exclusive lock made them queue behind each other; it changes only when an app comes or goes.
  mutable std::shared_mutex names_mu;

  std::mutex threads_mu;
  std::vector<std::jthread> threads;  // lifecycle and schedule work, joined at shutdown
  std::jthread ticker;
  // Every app sandbox is created here: its helper dies with the thread that started it.
  WorkQueue creator{1};
  std::atomic<bool> stopping{false};

  // ---- app_supervisor.cpp ----
  std::shared_ptr<App> find(std::string_view name) const;
  // Reads the artifact's latest version; nullptr (and forgets it) when it is no app.
  Result<std::shared_ptr<App>> load(const std::string& name);
  // The app of that name, loaded from the store if this server has not met it yet; not_found
  // (saying how to make it one) when the artifact is no app.
  Result<std::shared_ptr<App>> known_app(const std::string& name);
  void spawn(std::function<void(std::stop_token)> work);
  void tick();
  nlohmann::json status_json(const App& app) const;  // call with app.mu held
  void answer_waiters(App& app, std::unique_lock<std::mutex>& lock);

  // ---- app_environment.cpp ----
  // Brings up the sandbox and services (and the web process when `web`); returns once ready.
  Result<void> bring_up(App& app, bool web, std::stop_token stop);
  // Stops the web process; with `env` also the services and the sandbox. Data stays.
  void bring_down(App& app, bool env);
  Result<UniqueFd> connect(App& app, std::chrono::milliseconds timeout);
  std::string app_dir(const std::string& name) const { return opt.state_dir + "/apps/" + name; }
  // What an app's or schedule's trace records of who ran it: kiln serve, for the local user.
  ExecTraceInfo trace_info(const char* kind, const std::string& workspace_id, const std::string& name,
                           nlohmann::json policy) const {
    ExecTraceInfo info;
    info.kind = kind;
    info.workspace_id = workspace_id;
    info.name = name;
    info.client = nlohmann::json{{"name", "kiln serve"}};
    info.principal = opt.principal;
    info.policy = std::move(policy);
    return info;
  }

  // What the app may reach (app_network.h), under this server's --network-allow ceiling.
  nlohmann::json network_report(const AppConfig& config) const;

  // ---- app_schedules.cpp ----
  void tick_schedules(const std::shared_ptr<App>& app, std::int64_t now);
  Result<nlohmann::json> run_schedule(const std::shared_ptr<App>& app, const std::string& name, bool catch_up);

  // ---- app_state_db.cpp ----
  Result<void> open_db();
  void save_app(const App& app);  // call with app.mu held
  void load_saved(App& app);      // awake flag, restarts, schedule state
  void save_schedule(const App& app, const ScheduleRecord& s);
  bool was_awake(const std::string& name);
  void forget(const std::string& name);
};

}  // namespace kiln::server::apps
