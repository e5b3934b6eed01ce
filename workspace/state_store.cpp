// SQLite-backed state store. One connection per process, serialised by a mutex; WAL plus a busy
// timeout lets an agent's `kiln mcp` and an editor's share one state directory.
#include "workspace/state_store.h"

#include <sqlite3.h>
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

namespace kiln::workspace {

namespace {

// A statement that finalizes itself.
class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql) { rc_ = sqlite3_prepare_v2(db, sql, -1, &st_, nullptr); }
  ~Stmt() { sqlite3_finalize(st_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  bool ok() const { return rc_ == SQLITE_OK; }
  void bind(int i, const std::string& s) { sqlite3_bind_text(st_, i, s.data(), int(s.size()), SQLITE_TRANSIENT); }
  int step() { return sqlite3_step(st_); }
  std::string text(int col) const {
    auto p = reinterpret_cast<const char*>(sqlite3_column_text(st_, col));
    return p ? std::string(p) : std::string();
  }

 private:
  sqlite3_stmt* st_ = nullptr;
  int rc_ = SQLITE_ERROR;
};

WorkspaceRecord row_to_record(const Stmt& s) {
  return WorkspaceRecord{s.text(0), s.text(1), s.text(2), s.text(3), s.text(4)};
}

constexpr const char* kSelectColumns = "SELECT id, name, root, created_at, last_opened_at FROM workspaces ";

std::string random_id(std::string_view prefix) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  return fmt::format("{}{:012x}", prefix, rng() & 0xffffffffffffULL);
}

Error db_error(sqlite3* db, std::string_view what) {
  return Error{Errc::io, fmt::format("state store: {} failed: {}", what, sqlite3_errmsg(db))};
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
  std::error_code ec;
  std::filesystem::create_directories(state_dir, ec);
  if (ec) {
    return fail(Errc::io, fmt::format("cannot create state directory {}: {}; set KILN_HOME to a writable folder",
                                      state_dir, ec.message()));
  }
  ::chmod(state_dir.c_str(), 0700);  // traces, secrets and password hashes live here
  std::unique_ptr<StateStore> store(new StateStore(state_dir));
  std::string path = state_dir + "/kiln.db";
  int rc = sqlite3_open_v2(path.c_str(), &store->db_,
                           SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    return fail(Errc::io, fmt::format("cannot open state database {}: {}", path,
                                      store->db_ ? sqlite3_errmsg(store->db_) : "out of memory"));
  }
  sqlite3_busy_timeout(store->db_, 10000);
  // journal_mode=WAL persists in the file, so only a new database needs the switch (a write).
  if (auto r = store->exec("PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;"); !r) return std::unexpected(r.error());
  bool wal = false;
  {
    Stmt mode(store->db_, "PRAGMA journal_mode");
    wal = mode.ok() && mode.step() == SQLITE_ROW && mode.text(0) == "wal";
  }  // finalized here: the switch below cannot run inside the read's transaction
  if (!wal) {
    if (auto r = store->exec("PRAGMA journal_mode=WAL;"); !r) return std::unexpected(r.error());
  }
  if (auto r = store->migrate(); !r) return std::unexpected(r.error());
  return store;
}

StateStore::~StateStore() {
  if (db_) sqlite3_close(db_);
}

Result<void> StateStore::exec(const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : "unknown error";
    sqlite3_free(err);
    return fail(Errc::io, "state store: " + msg);
  }
  return {};
}

Result<void> StateStore::migrate() {
  // Versioned with user_version so later layers add tables without touching existing ones. An
  // up-to-date database is only read here: a write (and its sync) on every start would cost
  // more than the rest of start-up together.
  int version = 0;
  {
    Stmt ver(db_, "PRAGMA user_version");
    if (ver.ok() && ver.step() == SQLITE_ROW) version = std::stoi(ver.text(0));
  }
  if (version >= 1) return {};
  return exec(
      "BEGIN IMMEDIATE;"
      "CREATE TABLE IF NOT EXISTS workspaces ("
      "  id TEXT PRIMARY KEY, name TEXT NOT NULL UNIQUE, root TEXT NOT NULL UNIQUE,"
      "  created_at TEXT NOT NULL, last_opened_at TEXT NOT NULL);"
      "PRAGMA user_version = 1;"
      "COMMIT;");
}

Result<WorkspaceRecord> StateStore::open_workspace(const std::string& root, const std::string& wanted_name,
                                                   bool* created) {
  std::lock_guard lock(mu_);
  if (created) *created = false;
  const std::string now = now_iso8601();
  {
    Stmt upd(db_, "UPDATE workspaces SET last_opened_at = ?1 WHERE root = ?2");
    if (!upd.ok()) return std::unexpected(db_error(db_, "update"));
    upd.bind(1, now);
    upd.bind(2, root);
    if (upd.step() != SQLITE_DONE) return std::unexpected(db_error(db_, "update"));
  }
  if (sqlite3_changes(db_) == 0) {
    std::string base = wanted_name.empty() ? std::filesystem::path(root).filename().string() : wanted_name;
    if (base.empty()) base = "root";
    // Another kiln process may insert the same root concurrently: OR IGNORE, then read back.
    for (int attempt = 1; attempt < 1000; ++attempt) {
      std::string name = attempt == 1 ? base : fmt::format("{}-{}", base, attempt);
      Stmt ins(db_, "INSERT INTO workspaces(id, name, root, created_at, last_opened_at) VALUES (?1, ?2, ?3, ?4, ?4) "
                    "ON CONFLICT(root) DO NOTHING");
      if (!ins.ok()) return std::unexpected(db_error(db_, "insert"));
      ins.bind(1, random_id("ws_"));
      ins.bind(2, name);
      ins.bind(3, root);
      ins.bind(4, now);
      int rc = ins.step();
      if (rc == SQLITE_CONSTRAINT) continue;  // the name is taken by another folder
      if (rc != SQLITE_DONE) return std::unexpected(db_error(db_, "insert"));
      if (sqlite3_changes(db_) == 1 && created) *created = true;
      break;
    }
  }
  Stmt sel(db_, (std::string(kSelectColumns) + "WHERE root = ?1").c_str());
  sel.bind(1, root);
  if (sel.step() != SQLITE_ROW) return std::unexpected(db_error(db_, "select"));
  return row_to_record(sel);
}

Result<std::optional<WorkspaceRecord>> StateStore::find_workspace(const std::string& id_or_name) {
  std::lock_guard lock(mu_);
  Stmt sel(db_, (std::string(kSelectColumns) + "WHERE id = ?1 OR name = ?1 LIMIT 1").c_str());
  if (!sel.ok()) return std::unexpected(db_error(db_, "select"));
  sel.bind(1, id_or_name);
  int rc = sel.step();
  if (rc == SQLITE_ROW) return std::optional<WorkspaceRecord>(row_to_record(sel));
  if (rc == SQLITE_DONE) return std::optional<WorkspaceRecord>();
  return std::unexpected(db_error(db_, "select"));
}

Result<std::vector<WorkspaceRecord>> StateStore::list_workspaces() {
  std::lock_guard lock(mu_);
  Stmt sel(db_, (std::string(kSelectColumns) + "ORDER BY last_opened_at DESC").c_str());
  if (!sel.ok()) return std::unexpected(db_error(db_, "select"));
  std::vector<WorkspaceRecord> out;
  int rc;
  while ((rc = sel.step()) == SQLITE_ROW) out.push_back(row_to_record(sel));
  if (rc != SQLITE_DONE) return std::unexpected(db_error(db_, "select"));
  return out;
}

}  // namespace kiln::workspace
