// Transaction: BEGIN IMMEDIATE, COMMIT, and the ROLLBACK of every path that did not commit.
#include "db/transaction.h"

#include <sqlite3.h>

namespace kiln::db {

Transaction::~Transaction() {
  if (open_) sqlite3_exec(db_.db_, "ROLLBACK", nullptr, nullptr, nullptr);
}

Result<void> Transaction::begin() {
  if (sqlite3_exec(db_.db_, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) != SQLITE_OK)
    return std::unexpected(db_.error("begin"));
  open_ = true;
  return {};
}

Result<void> Transaction::commit() {
  if (sqlite3_exec(db_.db_, "COMMIT", nullptr, nullptr, nullptr) != SQLITE_OK)
    return std::unexpected(db_.error("commit"));
  open_ = false;
  return {};
}

}  // namespace kiln::db
