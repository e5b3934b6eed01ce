// Checkpoints (TOOLS.md "Checkpoints and what each run changed"): the state of every file
// file_list would show, kept as folder tree objects in <state>/checkpoints.db and file contents
// in the blob store artifacts use. A stat cache (inode, size, mtime, ctime) means an unchanged file
// is never read again. Knows nothing of MCP; tools/ and runs/ drive it.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "blobs/blob_store.h"
#include "core/error.h"
#include "db/database.h"
#include "workspace/checkpoint_tree.h"
#include "workspace/root.h"

namespace kiln::workspace {

struct CheckpointInfo {
  std::string id;  // cp_<hex>
  std::string workspace_id;
  std::string principal;
  std::string label;
  std::string trigger;  // manual, exec, verify, restore
  std::string created_at;
  std::string root;     // the root tree object
  std::uint64_t files = 0;
  std::uint64_t bytes = 0;
  std::uint64_t new_bytes = 0;  // blob bytes this checkpoint stored first
  std::string trace_id;
  double duration_ms = 0;
  std::vector<std::string> skipped;  // "path: why" (FIFOs, sockets, devices, unreadable files), first 20
  std::uint64_t skipped_count = 0;
  bool reused = false;  // an automatic checkpoint equal to the workspace's latest: that one was returned
  nlohmann::json to_json() const;
};

struct CheckpointRequest {
  const Root* root = nullptr;
  std::string workspace_id;
  std::string principal;
  std::string label;
  std::string trigger = "manual";
  std::string trace_id;
  // Automatic checkpoints: when the files are exactly those of the workspace's latest checkpoint,
  // return it instead of adding an equal one.
  bool reuse_latest = false;
};

struct DiffRequest {
  std::string from;
  std::optional<std::string> to;  // nullopt: the files now
  const Root* root = nullptr;     // needed when `to` is the files now
  std::string path;               // only changes at or under this relative path ("" all)
  std::size_t offset = 0;
  std::size_t limit = 50;
  std::size_t max_diff_bytes = 64 * 1024;  // per file; longer diffs are cut, with `diff_truncated`
};

struct DiffChange {
  std::string path;
  std::string change;  // added, modified, deleted
  std::optional<std::uint64_t> size_before, size_after;
  std::string type_before, type_after;  // file, symlink
  std::string sha_before, sha_after;
  std::optional<std::uint32_t> mode_before, mode_after;
  std::string diff;        // unified diff (text files, symlink targets)
  bool binary = false;     // no diff: compared by size and hash
  bool diff_truncated = false;
};

struct DiffResult {
  std::string from, to;  // to: a checkpoint id or "now"
  std::vector<DiffChange> changes;
  std::size_t total = 0;
  bool truncated = false;
  std::optional<std::size_t> next_offset;
};

struct RestoreRequest {
  const Root* root = nullptr;
  std::string workspace_id;
  std::string principal;
  std::string checkpoint_id;
  std::vector<std::string> paths;  // relative; empty: the whole workspace
  bool dry_run = false;
};

struct RestoreResult {
  std::vector<std::string> restored;  // written (added back or changed back)
  std::vector<std::string> deleted;   // removed (they were not in the checkpoint)
  std::string checkpoint_before;      // empty for a dry run
  std::vector<std::string> kept;      // folders not removed because they hold ignored files
  bool dry_run = false;
};

// What a run changed, for its trace (TOOLS.md: changes {added, modified, deleted, paths, ...}).
struct RunChanges {
  std::uint64_t added = 0, modified = 0, deleted = 0;
  std::vector<nlohmann::json> paths;  // [{path, change}], at most kMaxChangePaths
  bool paths_truncated = false;
  std::string checkpoint_before, checkpoint_after;
  nlohmann::json to_json() const;
};
inline constexpr std::size_t kMaxChangePaths = 200;
inline constexpr std::size_t kKeepAutomatic = 200;

class CheckpointStore {
 public:
  // <state_dir>/checkpoints.db (0600) beside the blob store's folders.
  static Result<std::unique_ptr<CheckpointStore>> open(const std::string& state_dir);
  ~CheckpointStore();

  // Whether another owner (the artifacts) references a blob; a prune deletes only what neither holds.
  using BlobReferrer = std::function<Result<bool>(const std::string& sha256)>;
  void set_blob_referrer(BlobReferrer referrer);
  // True while a checkpoint (or the stat cache behind them) holds the blob.
  Result<bool> references(const std::string& sha256);

  Result<CheckpointInfo> create(const CheckpointRequest& req, std::stop_token stop = {});
  // Newest first; `cursor` is the next_cursor of the previous page.
  struct Page {
    std::vector<CheckpointInfo> checkpoints;
    std::optional<std::string> next_cursor;
  };
  Result<Page> list(const std::string& workspace_id, const std::string& principal, std::size_t limit,
                    const std::string& cursor = {});
  // `principal` empty: any (the command line, the local user's own store).
  Result<CheckpointInfo> get(const std::string& id, const std::string& principal = {});
  Result<DiffResult> diff(const DiffRequest& req, const std::string& principal = {});
  Result<RestoreResult> restore(const RestoreRequest& req, std::stop_token stop = {});
  // Finishes a restore of this workspace that a killed process left half-done (its journal row in
  // checkpoints.db); create and restore do it first, and every checkpoint tool calls it.
  void recover(const Root& root, const std::string& workspace_id);
  Result<RunChanges> changes(const std::string& before_id, const std::string& after_id);
  // Deletes a checkpoint (its blobs go when nothing else holds them).
  Result<void> remove(const std::string& id, const std::string& principal = {});
  // Keeps the newest kKeepAutomatic automatic checkpoints of a workspace; returns how many went.
  Result<std::size_t> prune(const std::string& workspace_id);
  // The flat tree of a checkpoint (export, tests).
  Result<FlatTree> files(const std::string& id);
  const blobs::BlobStore& blob_store() const;

  struct Impl;

 private:
  explicit CheckpointStore(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::workspace
