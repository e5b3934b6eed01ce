// A write transaction that rolls back unless committed, so every early return of a store leaves the
// database as it was.
#pragma once

#include "core/error.h"
#include "db/database.h"

namespace kiln::db {

class Transaction {
 public:
  explicit Transaction(Database& db) : db_(db) {}
  ~Transaction();
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;

  // BEGIN IMMEDIATE: the write lock up front, so a busy database waits in the busy timeout
  // instead of failing half-way through the writes.
  Result<void> begin();
  Result<void> commit();

 private:
  Database& db_;
  bool open_ = false;
};

}  // namespace kiln::db
