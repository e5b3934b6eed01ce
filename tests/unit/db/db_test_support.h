// What the db tests share: a scratch folder that goes away, and the user_version of a database.
#pragma once

#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <string>

#include <doctest/doctest.h>

#include "db/database.h"
#include "db/statement.h"

#include "../temp_dir.h"

namespace kiln::db::test {

struct Scratch : kiln::test::TempDir {
  std::string dir = path;
  Scratch() : kiln::test::TempDir("kiln-db-test") {}
  std::string db() const { return dir + "/test.db"; }
};

inline Database open_db(const std::string& path, int busy_timeout_ms = 10000) {
  auto db = Database::open(path, {.label = "test", .busy_timeout_ms = busy_timeout_ms, .private_file = true});
  REQUIRE_MESSAGE(db, (db ? "" : db.error().message));
  return std::move(*db);
}

inline std::int64_t user_version(Database& db) {
  Statement s(db, "PRAGMA user_version");
  auto row = s.next("user_version");
  REQUIRE(row);
  REQUIRE(*row);
  return s.int64(0);
}

// Whether `table` exists in the database's schema.
inline bool has_table(Database& db, const std::string& table) {
  Statement s(db, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1");
  s.bind(1, table);
  auto row = s.next("sqlite_master");
  REQUIRE(row);
  return *row;
}

}  // namespace kiln::db::test
