// SQLite-backed state store. One connection per process, serialised by a mutex; WAL plus a busy
// timeout lets an agent's `kiln mcp` and an editor's share one state directory.
#include "workspace/state_store.h"

#include "workspace/state_dir.h"

#include <sys/stat.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fmt/format.h>
#include <mutex>
#include <random>

#include "db/migrate.h"
#include "db/statement.h"

namespace kiln::workspace {

namespace {

WorkspaceRecord row_to_record(const db::Statement& s) {
  return WorkspaceRecord{s.text(0), s.text(1), s.text(2), s.text(3), s.text(4)};
}

constexpr const char* kSelectColumns = "SELECT id, name, root, created_at, last_opened_at FROM workspaces ";

std::string random_id(std::string_view prefix) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  return fmt::format("{}{:012x}", prefix, rng() & 0xffffffffffffULL);
}

}  // namespace

std::string default_state_dir() {
  if (const char* k = std::getenv("KILN_HOME"); k && *k) return k;
  if (const char* x = std::getenv("XDG_STATE_HOME"); x && *x) return std::string(x) + "/kiln";
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : "/tmp") + "/.local/state/kiln";
}

std::string now_iso8601() {
  auto now = std::chrono::system_clock::now();
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count();
  std::time_t secs = std::time_t(ms / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                     tm.tm_hour, tm.tm_min, tm.tm_sec, int(ms % 1000));
}

Result<std::unique_ptr<StateStore>> StateStore::open(const std::string& state_dir) {
  auto store = unopened(state_dir);
  if (auto r = store->open_database(); !r) return std::unexpected(r.error());
  return store;
}

std::unique_ptr<StateStore> StateStore::unopened(const std::string& state_dir) {
  return std::unique_ptr<StateStore>(new StateStore(state_dir));
}

Result<void> StateStore::open_database() {
  // The one check and narrowing of the state directory (state_dir.h): a second chmod here would
  // narrow a folder that check refuses to touch.
  if (auto ok = secure_state_dir(dir_); !ok) return std::unexpected(ok.error());
  // Versioned with user_version so later layers add tables without touching existing ones.
  static constexpr db::Migration kSchema[] = {
      {1,
       "CREATE TABLE IF NOT EXISTS workspaces ("
       "  id TEXT PRIMARY KEY, name TEXT NOT NULL UNIQUE, root TEXT NOT NULL UNIQUE,"
       "  created_at TEXT NOT NULL, last_opened_at TEXT NOT NULL);"},
  };
  auto db = db::Database::open(dir_ + "/kiln.db", {.label = "state", .busy_timeout_ms = 10000, .schema = kSchema});
  if (!db) return std::unexpected(db.error());
  std::lock_guard lock(mu_);
  db_ = std::move(*db);
  return {};
}

Result<WorkspaceRecord> StateStore::open_workspace(const std::string& root, const std::string& wanted_name,
                                                   bool* created) {
  std::lock_guard lock(mu_);
  if (created) *created = false;
  const std::string now = now_iso8601();
  db::Statement upd(db_, "UPDATE workspaces SET last_opened_at = ?1 WHERE root = ?2");
  upd.bind(1, now);
  upd.bind(2, root);
  auto touched = upd.run("update");
  if (!touched) return std::unexpected(touched.error());
  if (*touched == 0) {
    std::string base = wanted_name.empty() ? std::filesystem::path(root).filename().string() : wanted_name;
    if (base.empty()) base = "root";
    // Another kiln process may insert the same root concurrently: OR IGNORE, then read back.
    for (int attempt = 1; attempt < 1000; ++attempt) {
      std::string name = attempt == 1 ? base : fmt::format("{}-{}", base, attempt);
      db::Statement ins(db_, "INSERT INTO workspaces(id, name, root, created_at, last_opened_at) "
                             "VALUES (?1, ?2, ?3, ?4, ?4) ON CONFLICT(root) DO NOTHING");
      ins.bind(1, random_id("ws_"));
      ins.bind(2, name);
      ins.bind(3, root);
      ins.bind(4, now);
      auto added = ins.run("insert");
      if (!added && added.error().code == Errc::conflict) continue;  // the name is taken by another folder
      if (!added) return std::unexpected(added.error());
      if (*added == 1 && created) *created = true;
      break;
    }
  }
  db::Statement sel(db_, std::string(kSelectColumns) + "WHERE root = ?1");
  sel.bind(1, root);
  auto row = sel.next("select");
  if (!row || !*row) return std::unexpected(row ? db_.error("select") : row.error());
  return row_to_record(sel);
}

Result<std::optional<WorkspaceRecord>> StateStore::find_workspace(const std::string& id_or_name) {
  std::lock_guard lock(mu_);
  db::Statement sel(db_, std::string(kSelectColumns) + "WHERE id = ?1 OR name = ?1 LIMIT 1");
  sel.bind(1, id_or_name);
  auto row = sel.next("select");
  if (!row) return std::unexpected(row.error());
  if (!*row) return std::optional<WorkspaceRecord>();
  return std::optional<WorkspaceRecord>(row_to_record(sel));
}

Result<std::vector<WorkspaceRecord>> StateStore::list_workspaces() {
  std::lock_guard lock(mu_);
  db::Statement sel(db_, std::string(kSelectColumns) + "ORDER BY last_opened_at DESC");
  std::vector<WorkspaceRecord> out;
  if (auto r = sel.each("select", [&] { out.push_back(row_to_record(sel)); }); !r) return std::unexpected(r.error());
  return out;
}

}  // namespace kiln::workspace
