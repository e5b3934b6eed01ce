// A prepared statement (taken from the connection's cache, and given back when done) that finalizes itself, with typed binds and columns, whose steps report
// failure as kiln::Error in the store's own words. The stores never see a SQLite result code.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/error.h"
#include "db/database.h"

struct sqlite3_stmt;

namespace kiln::db {

class Statement {
 public:
  // A statement that fails to prepare reports that failure from its first step.
  Statement(Database& db, std::string_view sql);
  ~Statement();
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  // Parameters count from 1, as in the SQL (?1, ?2, ...).
  void bind(int i, std::string_view s);
  void bind(int i, const char* s) { bind(i, std::string_view(s)); }
  void bind(int i, const std::string& s) { bind(i, std::string_view(s)); }
  void bind(int i, std::int64_t v);
  void bind(int i, int v) { bind(i, std::int64_t(v)); }
  void bind(int i, std::uint64_t v) { bind(i, std::int64_t(v)); }
  void bind(int i, bool v) { bind(i, std::int64_t(v ? 1 : 0)); }
  void bind_null(int i);
  template <class T>
  void bind(int i, const std::optional<T>& v) {
    if (v) bind(i, *v);
    else bind_null(i);
  }

  // The next row (true) or the end (false). `what` names the query in the error.
  Result<bool> next(std::string_view what);
  // Calls `row()` for every remaining row.
  template <class F>
  Result<void> each(std::string_view what, F&& row) {
    for (;;) {
      auto more = next(what);
      if (!more) return std::unexpected(more.error());
      if (!*more) return {};
      row();
    }
  }
  // Runs a statement that returns no rows: how many rows it changed. A constraint violation is
  // Errc::conflict, so a caller can retry with another id or name.
  Result<std::int64_t> run(std::string_view what);
  // Ready to step again from the start with new binds.
  void reset();

  // Columns count from 0. text() keeps every byte, NULs included; NULL reads as "" or 0.
  bool is_null(int col) const;
  std::int64_t int64(int col) const;
  std::string text(int col) const;
  std::optional<std::string> opt_text(int col) const;
  std::optional<std::int64_t> opt_int(int col) const;

 private:
  Error step_error(std::string_view what) const;

  Database& db_;
  sqlite3_stmt* st_ = nullptr;
  std::string sql_;  // the cache's key, to give the statement back
  std::string prepare_error_;  // SQLite's message when preparing failed
};

}  // namespace kiln::db
