// Prepared statements a connection keeps for reuse, by SQL text. A statement is lent to one
// Statement at a time (a second user of the same SQL prepares its own), given back reset and
// unbound, and finalized when the cache is full or the connection closes.
#pragma once

#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

struct sqlite3_stmt;

namespace kiln::db {

class StatementCache {
 public:
  StatementCache() = default;
  ~StatementCache();
  StatementCache(const StatementCache&) = delete;
  StatementCache& operator=(const StatementCache&) = delete;

  // The idle statement for `sql`, now lent out; nullptr when there is none.
  sqlite3_stmt* take(std::string_view sql);
  // Returns a statement (already reset) for the next user of `sql`, or finalizes it.
  void give_back(std::string_view sql, sqlite3_stmt* st);

 private:
  // Stores build most SQL from constants; the cap only guards against SQL built per call.
  static constexpr std::size_t kMax = 128;
  std::mutex mu_;  // connections are opened FULLMUTEX and shared by threads
  std::unordered_map<std::string, sqlite3_stmt*> idle_;
};

}  // namespace kiln::db
