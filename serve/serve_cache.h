// The daemon's hot path: which blob answers (name, version, path), and for public artifacts the
// whole access answer, kept for a second at most and dropped as soon as the artifact database
// changes on disk, so repeated requests skip the store's queries without a publish, share change
// or unpublish going unseen. Protected artifacts keep their access rules here on the same terms
// (artifacts::AccessRules): a session cookie is then checked against them in memory.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "artifacts/artifact_store.h"

namespace kiln::server::http {

class ServeCache {
 public:
  // Watches `dir`/`db_name` and its -wal with inotify (a stat per lookup where that is missing).
  ServeCache(std::string dir, std::string db_name, std::chrono::milliseconds ttl = std::chrono::milliseconds(1000));
  ~ServeCache();
  ServeCache(const ServeCache&) = delete;
  ServeCache& operator=(const ServeCache&) = delete;

  struct Hit {
    int version = 0;  // the version the store chose (the latest, for unversioned URLs)
    artifacts::ResolvedFile file;
  };
  // Which state of the database an answer belongs to.
  struct Stamp {
    std::int64_t a[8] = {};
    bool operator==(const Stamp&) const = default;
  };
  Stamp stamp() const;

  // The inotify descriptor (non-blocking), or -1. Its owner's event loop calls on_events()
  // whenever it is readable; stamp() also drains it, so no change waits for the loop.
  int watch_fd() const { return inotify_; }
  void on_events() const;

  enum class Kind : char {
    public_answer = 'P',  // URL (version as written) -> allowed + file, public artifacts only
    file = 'F',           // (name, version number, path) -> file, whoever may see it
  };
  static std::string key(Kind kind, const std::string& name, std::optional<int> version, const std::string& rel);
  // `now` from stamp(), taken before asking the store on a miss.
  std::optional<Hit> get(const std::string& key, const Stamp& now);
  // Kind::public_answer only for a public artifact the store just allowed without credentials.
  // `before` is the stamp taken before those store queries: if the database changed since,
  // nothing is kept.
  void put(const std::string& key, Hit hit, const Stamp& before);

  // An artifact's access rules as of `now` (nullptr: not known here; ask the store).
  std::shared_ptr<const artifacts::AccessRules> rules(const std::string& name, const Stamp& now);
  // Kept only if the database has not changed since `before` (taken before the store was asked).
  void put_rules(std::shared_ptr<const artifacts::AccessRules> rules, const Stamp& before);

 private:
  struct Entry {
    Hit hit;
    std::chrono::steady_clock::time_point until;
  };
  std::string dir_, db_name_, wal_name_;
  std::chrono::milliseconds ttl_;
  int inotify_ = -1;
  mutable std::atomic<std::int64_t> generation_{0};
  mutable std::mutex drain_mu_;
  // Each thread that asks gets an inotify instance of its own, drained by that thread alone, so a
  // lookup takes no lock (the shared one above is left to the event loop). Closed with the cache.
  const std::uint64_t id_;
  mutable std::mutex thread_fds_mu_;
  mutable std::vector<int> thread_fds_;
  int add_watch(int fd) const;
  int thread_fd() const;  // -1: none could be made; the shared queue is read under drain_mu_
  bool drain(int fd) const;  // whether an event on the database was read
  std::shared_mutex mu_;
  Stamp seen_;  // the database as it was when the entries were made
  std::unordered_map<std::string, Entry> entries_;
  struct RulesEntry {
    std::shared_ptr<const artifacts::AccessRules> rules;
    std::chrono::steady_clock::time_point until;
  };
  std::unordered_map<std::string, RulesEntry> rules_;
  // Under mu_ held exclusively: a new database state makes everything kept before it unusable.
  void reset_locked(const Stamp& now);
};

}  // namespace kiln::server::http
