// What the checkpoint store's .cpp files share: the implementation object, its stat cache and the
// reference counting of tree objects and blobs in checkpoints.db.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <stop_token>
#include <unordered_set>
#include <string>
#include <unordered_map>
#include <vector>

#include "db/database.h"
#include "db/statement.h"
#include "db/transaction.h"
#include "workspace/checkpoint_scan.h"
#include "workspace/checkpoint_watch.h"
#include "workspace/checkpoint_store.h"

namespace kiln::workspace {

// What the last hash of a path saw. A hit needs every field equal and an mtime older than the
// hash by more than kRacyNs: a file written in the same clock tick as its hash could change
// again without its mtime moving, so such an entry is checked again next time (git's racy rule).
struct CacheEntry {
  std::uint64_t ino = 0, size = 0;
  std::int64_t mtime_ns = 0, ctime_ns = 0;
  std::string sha;
  std::int64_t hashed_at_ns = 0;
};
inline constexpr std::int64_t kRacyNs = 1'000'000'000;

struct WorkspaceCache {
  bool loaded = false;
  std::unordered_map<std::string, CacheEntry> entries;
  // The last scan (with hashes) and what inotify has heard since: an automatic checkpoint re-reads
  // only the folders that changed. Touched only under the workspace's lock.
  std::unique_ptr<WorkspaceWatch> watch;
  std::vector<ScanNode> base;
  std::string base_root;
  std::set<std::string> linked_dirs;  // folders of the base holding a file with other names
  bool base_valid = false;
  int partial_scans = 0;  // since the last full one; a full scan every kFullScanEvery
};
// A full scan now and then all the same: a change inotify cannot see (a write through mmap, a
// file changed through a hard link elsewhere) is caught within this many automatic checkpoints.
inline constexpr int kFullScanEvery = 50;

struct CheckpointStore::Impl {
  std::string dir;
  blobs::BlobStore blobs;
  db::Database db;
  std::mutex mu;  // db, caches and referrer; never held while waiting for the blob lock
  BlobReferrer referrer;
  std::map<std::string, WorkspaceCache> caches;  // by workspace id
  // One create or restore at a time per workspace (they read and write the same files).
  std::mutex ws_mu;
  std::map<std::string, std::shared_ptr<std::mutex>> ws_locks;

  explicit Impl(std::string d) : dir(d), blobs(std::move(d)) {}

  std::shared_ptr<std::mutex> workspace_lock(const std::string& ws);
  std::optional<std::string> load_tree(const std::string& sha);  // takes mu
  TreeLoader loader() { return [this](const std::string& sha) { return load_tree(sha); }; }
  Result<CheckpointInfo> row(const std::string& id, const std::string& principal);
  Result<WorkspaceCache*> cache_locked(const std::string& ws);

  // Inside a transaction (mu held): one more reference to a tree object that exists, one less
  // (deleting it, and what only it held, at zero). Blobs whose count reaches zero are collected
  // into `freed`.
  Result<void> ref_tree_locked(const std::string& sha);
  Result<void> unref_tree_locked(const std::string& sha, std::vector<std::string>& freed);
  // Deletes blobs no checkpoint and no artifact holds. Takes the blob lock exclusively; call
  // without mu.
  void collect(const std::vector<std::string>& freed);
  Result<void> remove_locked(const CheckpointInfo& c, std::vector<std::string>& freed);
  // A restore journal left by a killed process: apply it again (it is idempotent), then drop it.
  // Best effort: whatever happens, the journal goes (the checkpoint before the restore stays).
  void finish_interrupted_restore(const Root& root, const std::string& workspace_id);
};

std::string random_checkpoint_id();
// The checkpoints table's columns in the order read_checkpoint_row reads them.
extern const char* const kCheckpointColumns;
CheckpointInfo read_checkpoint_row(db::Statement& s);

}  // namespace kiln::workspace

namespace kiln::workspace {
// The files now as a flat tree, hashed but stored nowhere (a diff against now, a dry run, the
// end of an interrupted restore): the stat cache answers what it can, the rest is read.
std::string parent_folder(const std::string& path);  // "" for a top-level entry

// The last scan with the folders inotify named read again: their direct entries replaced, new
// subfolders scanned whole, folders that went (or stopped being folders) dropped with their
// contents. Folders holding a file with other names are always read again (a write through
// another name tells this folder nothing). `changed` receives every folder whose object must be
// encoded again (those re-read, the ones that went, and their parents up to the root); `removed`
// the files of re-read folders (those not listed again went).
Result<std::vector<ScanNode>> rescan_changed(const Root& root, std::vector<ScanNode>&& base, std::set<std::string> dirty,
                                             WorkspaceWatch* watch, std::stop_token stop, ScanResult& notes,
                                             std::unordered_set<std::string>& changed,
                                             std::vector<std::string>& removed);

// create() with the workspace's lock already held (restore makes its "before" this way).
Result<CheckpointInfo> create_checkpoint_locked(CheckpointStore::Impl& im, const CheckpointRequest& req,
                                                std::stop_token stop);
Result<FlatTree> snapshot_now(CheckpointStore::Impl& im, const Root& root, const std::string& workspace_id,
                              std::stop_token stop);
}  // namespace kiln::workspace
