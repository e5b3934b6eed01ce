// migrate(): reads user_version, and only when a step is missing takes the write lock, reads it
// again and runs what is still missing.
#include "db/migrate.h"

#include <string>

#include "db/statement.h"
#include "db/transaction.h"

namespace kiln::db {

namespace {

Result<std::int64_t> user_version(Database& db) {
  Statement ver(db, "PRAGMA user_version");
  auto row = ver.next("read user_version");
  if (!row) return std::unexpected(row.error());
  return *row ? ver.int64(0) : 0;
}

}  // namespace

Result<void> migrate(Database& db, std::span<const Migration> steps) {
  if (steps.empty()) return {};
  for (std::size_t i = 1; i < steps.size(); ++i) {
    if (steps[i].version <= steps[i - 1].version)
      return fail(Errc::internal, db.label() + " store: migration steps are not in increasing version order");
  }
  auto found = user_version(db);
  if (!found) return std::unexpected(found.error());
  if (*found >= steps.back().version) return {};
  Transaction tx(db);
  if (auto r = tx.begin(); !r) return r;
  found = user_version(db);  // another process may have migrated while we waited
  if (!found) return std::unexpected(found.error());
  for (const auto& step : steps) {
    if (step.version <= *found) continue;
    if (auto r = db.exec(step.sql); !r) return r;
    if (auto r = db.exec(("PRAGMA user_version = " + std::to_string(step.version) + ";").c_str()); !r) return r;
  }
  return tx.commit();
}

}  // namespace kiln::db
