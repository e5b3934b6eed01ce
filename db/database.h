// One SQLite connection as every Kiln store opens it: WAL, synchronous=NORMAL, foreign keys, a busy
// timeout, so several kiln processes can share one state directory. Errors come back as kiln::Error.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "core/error.h"

struct sqlite3;
struct sqlite3_stmt;

namespace kiln::db {

struct Migration;
class StatementCache;

struct OpenOptions {
  std::string label;          // "trace": messages say "trace store: ..." and "cannot open trace database"
  int busy_timeout_ms = 10000;
  bool private_file = false;  // create the file 0600 first (SQLite gives -wal and -shm the same mode)
  std::span<const Migration> schema;  // brought up to date on open (db/migrate.h)
};

class Database {
 public:
  // Opens (creating if missing) the database at `path` in WAL mode and migrates its schema.
  static Result<Database> open(const std::string& path, const OpenOptions& options);

  Database();
  ~Database();
  Database(Database&& other) noexcept;
  Database& operator=(Database&& other) noexcept;
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  // Runs one or more statements that return nothing the caller needs (pragmas, schema scripts).
  Result<void> exec(const char* sql);
  // The connection's last error as "<label> store: <what> failed: <message>", with what to do when
  // the disk under the state directory is full.
  Error error(std::string_view what) const;
  const std::string& label() const { return label_; }

 private:
  friend class Statement;
  friend class Transaction;

  sqlite3* db_ = nullptr;
  std::string label_;
  // Prepared statements kept for reuse by their SQL text: parsing the same few queries again on
  // every call was a sixth of the server's work for a short sandbox_exec.
  std::unique_ptr<StatementCache> cache_;
};

}  // namespace kiln::db
