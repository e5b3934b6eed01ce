// Statement: SQLite's prepare/bind/step/column calls behind types, and the one place that turns a
// failed step into the store's error.
#include "db/statement.h"

#include <sqlite3.h>

#include "db/statement_cache.h"

namespace kiln::db {

Statement::Statement(Database& db, std::string_view sql) : db_(db), sql_(sql) {
  if (db.cache_ && (st_ = db.cache_->take(sql))) return;
  if (sqlite3_prepare_v3(db.db_, sql.data(), int(sql.size()), SQLITE_PREPARE_PERSISTENT, &st_, nullptr) != SQLITE_OK) {
    prepare_error_ = sqlite3_errmsg(db.db_);
    sqlite3_finalize(st_);
    st_ = nullptr;
  }
}

Statement::~Statement() {
  if (!st_) return;
  // Reset (ends a read that stopped before its last row) and unbound: nothing of this use stays.
  sqlite3_reset(st_);
  sqlite3_clear_bindings(st_);
  if (db_.cache_) db_.cache_->give_back(sql_, st_);
  else sqlite3_finalize(st_);
}

void Statement::bind(int i, std::string_view s) {
  if (st_) sqlite3_bind_text(st_, i, s.data(), int(s.size()), SQLITE_TRANSIENT);
}

void Statement::bind(int i, std::int64_t v) {
  if (st_) sqlite3_bind_int64(st_, i, v);
}

void Statement::bind_null(int i) {
  if (st_) sqlite3_bind_null(st_, i);
}

Error Statement::step_error(std::string_view what) const {
  if (!st_) return Error{Errc::io, db_.label_ + " store: " + std::string(what) + " failed: " + prepare_error_};
  Error e = db_.error(what);
  if (sqlite3_errcode(db_.db_) == SQLITE_CONSTRAINT) e.code = Errc::conflict;
  return e;
}

Result<bool> Statement::next(std::string_view what) {
  if (!st_) return std::unexpected(step_error(what));
  int rc = sqlite3_step(st_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return std::unexpected(step_error(what));
}

Result<std::int64_t> Statement::run(std::string_view what) {
  if (!st_) return std::unexpected(step_error(what));
  int rc = sqlite3_step(st_);
  if (rc != SQLITE_DONE) return std::unexpected(step_error(what));
  return std::int64_t(sqlite3_changes(db_.db_));
}

void Statement::reset() {
  if (!st_) return;
  sqlite3_reset(st_);
  sqlite3_clear_bindings(st_);
}

bool Statement::is_null(int col) const { return sqlite3_column_type(st_, col) == SQLITE_NULL; }

std::int64_t Statement::int64(int col) const { return sqlite3_column_int64(st_, col); }

std::string Statement::text(int col) const {
  auto p = reinterpret_cast<const char*>(sqlite3_column_text(st_, col));
  return p ? std::string(p, std::size_t(sqlite3_column_bytes(st_, col))) : std::string();
}

std::optional<std::string> Statement::opt_text(int col) const {
  return is_null(col) ? std::nullopt : std::optional(text(col));
}

std::optional<std::int64_t> Statement::opt_int(int col) const {
  return is_null(col) ? std::nullopt : std::optional(int64(col));
}

}  // namespace kiln::db
