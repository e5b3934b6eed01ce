// What of the apps must survive a restart of `kiln serve` (and of the machine): whether each was
// awake, its restart count and last error, and per schedule the time up to which fires were
// handled (so a run missed while the server was down happens once) and its last run.
#include "serve/app_impl.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "db/migrate.h"
#include "db/statement.h"

namespace kiln::server::apps {

namespace {

constexpr db::Migration kSchema[] = {
    {1, R"sql(
CREATE TABLE apps (
  name TEXT PRIMARY KEY,
  awake INTEGER NOT NULL DEFAULT 0,
  restarts INTEGER NOT NULL DEFAULT 0,
  last_error TEXT
);
CREATE TABLE schedules (
  app TEXT NOT NULL,
  name TEXT NOT NULL,
  checked_at INTEGER NOT NULL,
  last_trace_id TEXT,
  last_status TEXT,
  last_at TEXT,
  PRIMARY KEY (app, name)
);
)sql"},
};

void warn(const Result<std::int64_t>& r) {
  if (!r) spdlog::warn("apps: {}", r.error().message);
}

}  // namespace

Result<void> Supervisor::Impl::open_db() {
  auto d = db::Database::open(opt.state_dir + "/apps.db",
                              {.label = "app", .busy_timeout_ms = 10000, .private_file = true, .schema = kSchema});
  if (!d) return std::unexpected(d.error());
  db = std::move(*d);
  return {};
}

void Supervisor::Impl::save_app(const App& app) {
  // A shutdown stops every app; it must not record them as asleep, or none would come back.
  if (stopping) return;
  const bool awake = app.state == AppState::running || app.state == AppState::starting || app.state == AppState::crashed;
  std::lock_guard lock(db_mu);
  db::Statement st(db, R"sql(INSERT INTO apps (name, awake, restarts, last_error) VALUES (?1, ?2, ?3, ?4)
    ON CONFLICT(name) DO UPDATE SET awake = ?2, restarts = ?3, last_error = ?4)sql");
  st.bind(1, app.name);
  st.bind(2, awake);
  st.bind(3, app.restarts);
  st.bind(4, app.last_error);
  warn(st.run("saving an app's state"));
}

void Supervisor::Impl::load_saved(App& app) {
  // Read first, apply after: the order elsewhere is app.mu before db_mu.
  std::optional<std::pair<int, std::string>> saved;
  struct Row {
    std::string name, trace_id, status, at;
    std::int64_t checked_at;
  };
  std::vector<Row> rows;
  {
    std::lock_guard dl(db_mu);
    db::Statement a(db, "SELECT restarts, last_error FROM apps WHERE name = ?1");
    a.bind(1, app.name);
    if (auto row = a.next("reading an app's state"); row && *row) saved.emplace(int(a.int64(0)), a.text(1));
    db::Statement s(db, "SELECT name, checked_at, last_trace_id, last_status, last_at FROM schedules WHERE app = ?1");
    s.bind(1, app.name);
    auto ok = s.each("reading schedule state",
                     [&] { rows.push_back({s.text(0), s.text(2), s.text(3), s.text(4), s.int64(1)}); });
    if (!ok) spdlog::warn("apps: {}", ok.error().message);
  }
  std::lock_guard lock(app.mu);
  if (saved) {
    app.restarts = saved->first;
    app.last_error = saved->second;
  }
  for (const auto& r : rows) {
    auto it = app.schedules.find(r.name);
    if (it == app.schedules.end()) continue;
    it->second.checked_at = r.checked_at;
    it->second.last_trace_id = r.trace_id;
    it->second.last_status = r.status;
    it->second.last_at = r.at;
  }
}

void Supervisor::Impl::save_schedule(const App& app, const ScheduleRecord& r) {
  std::lock_guard lock(db_mu);
  db::Statement st(db, R"sql(INSERT INTO schedules (app, name, checked_at, last_trace_id, last_status, last_at)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT(app, name) DO UPDATE SET checked_at = ?3, last_trace_id = ?4,
    last_status = ?5, last_at = ?6)sql");
  st.bind(1, app.name);
  st.bind(2, r.config.name);
  st.bind(3, r.checked_at);
  st.bind(4, r.last_trace_id);
  st.bind(5, r.last_status);
  st.bind(6, r.last_at);
  warn(st.run("saving schedule state"));
}

bool Supervisor::Impl::was_awake(const std::string& name) {
  std::lock_guard lock(db_mu);
  db::Statement st(db, "SELECT awake FROM apps WHERE name = ?1");
  st.bind(1, name);
  auto row = st.next("reading an app's state");
  return row && *row && st.int64(0) != 0;
}

void Supervisor::Impl::forget(const std::string& name) {
  std::lock_guard lock(db_mu);
  for (const char* sql : {"DELETE FROM apps WHERE name = ?1", "DELETE FROM schedules WHERE app = ?1"}) {
    db::Statement st(db, sql);
    st.bind(1, name);
    warn(st.run("forgetting an app"));
  }
}

}  // namespace kiln::server::apps
