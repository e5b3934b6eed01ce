// StatementCache: lending and returning prepared statements.
#include "db/statement_cache.h"

#include <sqlite3.h>

#include <utility>

namespace kiln::db {

StatementCache::~StatementCache() {
  for (auto& [sql, st] : idle_) sqlite3_finalize(st);
}

sqlite3_stmt* StatementCache::take(std::string_view sql) {
  std::lock_guard lock(mu_);
  auto it = idle_.find(std::string(sql));
  if (it == idle_.end() || !it->second) return nullptr;
  return std::exchange(it->second, nullptr);
}

void StatementCache::give_back(std::string_view sql, sqlite3_stmt* st) {
  {
    std::lock_guard lock(mu_);
    auto it = idle_.find(std::string(sql));
    if (it == idle_.end() && idle_.size() < kMax) it = idle_.emplace(std::string(sql), nullptr).first;
    if (it != idle_.end() && !it->second) {
      it->second = st;
      return;
    }
  }
  sqlite3_finalize(st);
}

}  // namespace kiln::db
