// Making a checkpoint: scan, reuse what the stat cache vouches for, hash the rest on worker
// threads straight into the blob store, then record the new folder objects, the reference counts
// and the checkpoint in one transaction, under the shared blob lock so no collection interleaves.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <unordered_set>

#include <fmt/format.h>

#include "workspace/checkpoint_internal.h"
#include "workspace/state_store.h"

namespace kiln::workspace {

using json = nlohmann::json;

namespace {

struct Miss {
  std::size_t node = 0;  // index into the scan
  bool cacheable = true;
  bool gone = false;     // deleted or swapped for something else since the scan
};

std::string full_disk(const std::string& dir, int err) {
  if (err == ENOSPC || err == EDQUOT)
    return fmt::format("the state directory {} is full ({}): the checkpoint was not made; free space there (kiln "
                       "checkpoint rm old checkpoints, unpublish old versions) or set KILN_HOME to a folder on a larger "
                       "disk; automatic checkpoints can be turned off with kiln.json \"checkpoints\": {{\"auto\": false}}",
                       dir, std::strerror(err));
  return fmt::format("cannot write to {}: {}", dir, std::strerror(err));
}

struct Emitted {
  std::string sha, encoded;
  std::vector<TreeChild> kids;
};

}  // namespace

Result<WorkspaceCache*> CheckpointStore::Impl::cache_locked(const std::string& ws) {
  WorkspaceCache& c = caches[ws];
  if (c.loaded) return &c;
  db::Statement s(db, "SELECT path, ino, size, mtime_ns, ctime_ns, sha, hashed_at_ns FROM stat_cache WHERE workspace_id = ?1");
  s.bind(1, ws);
  if (auto r = s.each("load stat cache", [&] {
        c.entries[s.text(0)] = CacheEntry{std::uint64_t(s.int64(1)), std::uint64_t(s.int64(2)), s.int64(3), s.int64(4),
                                          s.text(5), s.int64(6)};
      });
      !r)
    return std::unexpected(r.error());
  c.loaded = true;
  return &c;
}

namespace {
// What create() does with the workspace lock held; `trust_cache` false after a cached hash
// turned out to have lost its blob (another process collected it), so everything is read again.
Result<CheckpointInfo> create_locked(CheckpointStore::Impl& im, const CheckpointRequest& req, std::stop_token stop,
                                     bool trust_cache, bool& retry) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::int64_t started_ns = now_ns();
  WorkspaceCache* wc = nullptr;
  {
    std::lock_guard lock(im.mu);
    auto c = im.cache_locked(req.workspace_id);
    if (!c) return std::unexpected(c.error());
    wc = *c;  // std::map: the entry stays put
  }
  // The watch is trusted except for a restore's undo point (which must be exact) and every
  // kFullScanEvery-th checkpoint, which reads everything.
  const bool may_skip = req.trigger != "restore" && trust_cache && wc->watch && wc->base_valid &&
                        wc->partial_scans < kFullScanEvery;
  std::optional<ScanResult> scanned_storage;
  std::unordered_set<std::string> changed_dirs;  // after a partial read: folders to encode again
  std::vector<std::string> removed_files;        // ... and the files it may have seen go
  bool partial = false;
  if (may_skip) {
    auto dirty = wc->watch->drain();
    // A write through another name of a hard link tells these folders nothing: read them always.
    dirty.dirs.insert(wc->linked_dirs.begin(), wc->linked_dirs.end());
    if (!dirty.all) {
      if (dirty.dirs.empty() && req.reuse_latest) {
        // Nothing happened: the latest checkpoint is still the state, if it is the one we scanned.
        std::lock_guard lock(im.mu);
        db::Statement s(im.db, fmt::format("SELECT {} FROM checkpoints WHERE workspace_id = ?1 AND principal = ?2 "
                                           "ORDER BY seq DESC LIMIT 1",
                                           kCheckpointColumns));
        s.bind(1, req.workspace_id);
        s.bind(2, req.principal);
        if (s.next("select latest checkpoint").value_or(false)) {
          CheckpointInfo l = read_checkpoint_row(s);
          if (l.root == wc->base_root) {
            l.reused = true;
            ++wc->partial_scans;
            return l;
          }
        }
      }
      ScanResult r;
      wc->base_valid = false;  // consumed below; set again once this checkpoint is recorded
      auto nodes = rescan_changed(*req.root, std::move(wc->base), dirty.dirs, wc->watch.get(), stop, r, changed_dirs,
                          removed_files);
      if (!nodes) return std::unexpected(nodes.error());
      if (nodes->size() > kMaxCheckpointEntries) return std::unexpected(too_many_entries());
      partial = true;
      r.nodes = std::move(*nodes);
      scanned_storage = std::move(r);
      ++wc->partial_scans;
    }
  }
  if (!scanned_storage) {
    if (!wc->watch) wc->watch = WorkspaceWatch::start(req.root->path());
    if (wc->watch) (void)wc->watch->drain();  // this scan reads everything; older news is moot
    wc->base_valid = false;
    auto full = scan_workspace(*req.root, stop, wc->watch.get());
    if (!full) return std::unexpected(full.error());
    scanned_storage = std::move(*full);
    wc->partial_scans = 0;
  }
  ScanResult* scanned = &*scanned_storage;

  auto& nodes = scanned->nodes;

  // Cache lookups, and the misses to hash.
  std::vector<Miss> misses;
  std::size_t hits = 0, cache_size = 0;
  {
    std::lock_guard lock(im.mu);
    auto cache = im.cache_locked(req.workspace_id);
    if (!cache) return std::unexpected(cache.error());
    if (!trust_cache) (*cache)->entries.clear();
    cache_size = (*cache)->entries.size();
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      ScanNode& n = nodes[i];
      if (n.entry.type != EntryType::file) continue;
      if (!n.entry.sha.empty()) {  // unchanged since the last scan, which hashed it
        ++hits;
        continue;
      }
      auto it = (*cache)->entries.find(n.entry.path);
      if (it != (*cache)->entries.end()) {
        const CacheEntry& c = it->second;
        if (c.ino == n.ino && c.size == n.entry.size && c.mtime_ns == n.mtime_ns && c.ctime_ns == n.ctime_ns &&
            n.mtime_ns < c.hashed_at_ns - kRacyNs) {
          n.entry.sha = c.sha;
          ++hits;
          continue;
        }
      }
      misses.push_back({i});
    }
  }

  // The files to read could need more room than the state directory has (sparse files take no
  // disk in the workspace but their every byte in the store): refused before anything is written,
  // rather than filling that disk for everyone and failing at the end. An overestimate (contents
  // the store already holds count too), so it only ever refuses a checkpoint that might not fit.
  {
    std::uint64_t want = 0;
    for (const auto& m : misses) want += nodes[m.node].entry.size;
    struct statvfs vfs {};
    if (want > 0 && ::statvfs(im.dir.c_str(), &vfs) == 0) {
      const std::uint64_t free_bytes = std::uint64_t(vfs.f_bavail) * vfs.f_frsize;
      if (want > free_bytes)
        return fail(Errc::io, fmt::format("{} (the changed files hold {} MiB, {} MiB are free there)", full_disk(im.dir, ENOSPC),
                                          (want + (1 << 20) - 1) >> 20, free_bytes >> 20));
    }
  }
  auto hold = im.blobs.lock_shared();
  if (!hold) return std::unexpected(hold.error());
  const blobs::WriteFailure wf = [&](int err) { return full_disk(im.dir, err); };
  std::atomic<std::uint64_t> new_bytes{0};
  std::unordered_set<std::string> stored_now;
  std::mutex stored_mu;
  std::atomic<std::size_t> next{0};
  std::optional<Error> failure;
  std::mutex failure_mu;
  auto note_failure = [&](Error e) {
    std::lock_guard lock(failure_mu);
    if (!failure) failure = std::move(e);
  };
  auto stored = [&](const blobs::Blob& b) {
    if (b.is_new) new_bytes += b.size;
    std::lock_guard lock(stored_mu);
    stored_now.insert(b.sha256);
  };
  auto worker = [&] {
    for (;;) {
      std::size_t k = next++;
      if (k >= misses.size() || stop.stop_requested()) return;
      {
        std::lock_guard lock(failure_mu);
        if (failure) return;
      }
      Miss& m = misses[k];
      ScanNode& n = nodes[m.node];
      for (int attempt = 0;; ++attempt) {
        auto fd = req.root->open(n.entry.path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        if (!fd) {
          if (fd.error().code == Errc::not_found || fd.error().code == Errc::path_escape) m.gone = true;
          else note_failure(fd.error());
          break;
        }
        struct stat before {};
        if (::fstat(fd->get(), &before) != 0 || !S_ISREG(before.st_mode)) {
          m.gone = true;
          break;
        }
        auto blob = im.blobs.put(fd->get(), UINT64_MAX, n.entry.path, wf);
        if (!blob) {
          note_failure(blob.error());
          break;
        }
        struct stat after {};
        ::fstat(fd->get(), &after);
        bool steady = timespec_ns(before.st_mtim) == timespec_ns(after.st_mtim) && before.st_size == after.st_size &&
                      timespec_ns(before.st_ctim) == timespec_ns(after.st_ctim) && blob->size == std::uint64_t(after.st_size);
        if (!steady && attempt < 2) continue;  // written to while read: read it again
        stored(*blob);
        n.entry.sha = blob->sha256;
        n.entry.size = blob->size;
        n.entry.mode = std::uint32_t(after.st_mode & 07777);
        n.ino = std::uint64_t(after.st_ino);
        n.mtime_ns = timespec_ns(after.st_mtim);
        n.ctime_ns = timespec_ns(after.st_ctim);
        m.cacheable = steady;
        break;
      }
    }
  };
  {
    unsigned threads = std::max(1u, std::min<unsigned>(std::thread::hardware_concurrency(), unsigned(misses.size() / 8 + 1)));
    std::vector<std::jthread> pool;
    for (unsigned t = 1; t < threads; ++t) pool.emplace_back(worker);
    worker();
  }
  if (stop.stop_requested()) return fail(Errc::cancelled, "the checkpoint was cancelled; nothing was recorded");
  if (failure) return std::unexpected(*failure);
  // Links: their target text is their content.
  for (auto& n : nodes) {
    if (n.entry.type != EntryType::symlink) continue;
    auto b = im.blobs.put_bytes(n.link_target, wf);
    if (!b) return std::unexpected(b.error());
    stored(*b);
    n.entry.sha = b->sha256;
  }
  std::unordered_set<std::size_t> gone;
  for (const auto& m : misses)
    if (m.gone) gone.insert(m.node);
  // The entries move into the flat tree and back (100,000 paths are not copied twice).
  FlatTree flat;
  flat.reserve(nodes.size());
  std::vector<std::size_t> at;
  at.reserve(nodes.size());
  std::uint64_t files = 0, bytes = 0;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (!gone.empty() && gone.count(i)) continue;
    if (nodes[i].entry.type != EntryType::dir) {
      ++files;
      bytes += nodes[i].entry.size;
    }
    flat.push_back(std::move(nodes[i].entry));
    at.push_back(i);
  }
  std::vector<Emitted> emitted;
  std::unordered_set<std::string> seen;
  // After a partial read, a folder outside the re-read ones (and their parents) is as the last
  // checkpoint stored it.
  TreeReuse reuse;
  if (!changed_dirs.empty() || partial) {
    reuse = [&](const std::string& dir) { return !changed_dirs.count(dir); };
  }
  const std::string root = build_trees(
      flat,
      [&](const std::string& sha, const std::string& enc, const std::vector<TreeChild>& kids) {
        if (seen.insert(sha).second) emitted.push_back({sha, enc, kids});
      },
      reuse);
  for (std::size_t k = 0; k < flat.size(); ++k) nodes[at[k]].entry = std::move(flat[k]);
  // One flush before the rows that make the new blobs reachable are committed, for the
  // checkpoints a person asked for (and a restore's undo point). Automatic ones skip it: a
  // syncfs costs tens of milliseconds on every run, and what it guards against is a power cut
  // (a killed process loses nothing from the page cache); after one, a restore names any file
  // whose content did not reach the disk.
  if (new_bytes.load() > 0 && (req.trigger == "manual" || req.trigger == "restore")) im.blobs.sync();

  CheckpointInfo info;
  info.workspace_id = req.workspace_id;
  info.principal = req.principal;
  info.label = req.label;
  info.trigger = req.trigger;
  info.trace_id = req.trace_id;
  info.root = root;
  info.files = files;
  info.bytes = bytes;
  info.new_bytes = new_bytes;
  info.skipped = scanned->skipped;
  info.skipped_count = scanned->skipped_count;

  std::lock_guard lock(im.mu);
  auto cache = im.cache_locked(req.workspace_id);
  if (!cache) return std::unexpected(cache.error());
  db::Transaction tx(im.db);
  if (auto r = tx.begin(); !r) return std::unexpected(r.error());

  std::optional<CheckpointInfo> latest;
  if (req.reuse_latest) {
    db::Statement s(im.db,
                    "SELECT id FROM checkpoints WHERE workspace_id = ?1 AND principal = ?2 ORDER BY seq DESC LIMIT 1");
    s.bind(1, req.workspace_id);
    s.bind(2, req.principal);
    auto more = s.next("select latest checkpoint");
    if (!more) return std::unexpected(more.error());
    if (*more) {
      db::Statement r(im.db, fmt::format("SELECT {} FROM checkpoints WHERE id = ?1", kCheckpointColumns));
      r.bind(1, s.text(0));
      if (r.next("select latest checkpoint").value_or(false)) {
        CheckpointInfo l = read_checkpoint_row(r);
        if (l.root == root) latest = std::move(l);
      }
    }
  }

  if (!latest) {
    db::Statement ins(im.db, "INSERT OR IGNORE INTO trees(sha, refs, data) VALUES (?1, 0, ?2)");
    db::Statement bref(im.db,
                       "INSERT INTO blob_refs(sha, refs) VALUES (?1, 1) ON CONFLICT(sha) DO UPDATE SET refs = refs + 1 "
                       "RETURNING refs");
    for (const auto& e : emitted) {
      ins.reset();
      ins.bind(1, e.sha);
      ins.bind(2, e.encoded);
      auto added = ins.run("insert tree");
      if (!added) return std::unexpected(added.error());
      if (*added == 0) continue;  // an equal folder is stored already, with its references
      for (const auto& k : e.kids) {
        if (k.type == EntryType::dir) {
          if (auto r = im.ref_tree_locked(k.sha); !r) {
            // A folder kept from the last checkpoint whose object went with it (removed since).
            retry = partial;
            return std::unexpected(r.error());
          }
          continue;
        }
        bref.reset();
        bref.bind(1, k.sha);
        auto n = bref.next("reference blob");
        if (!n || !*n) return std::unexpected(n ? im.db.error("reference blob") : n.error());
        std::int64_t refs = bref.int64(0);
        (void)bref.next("reference blob");
        // Newly held, from a cache hit: another process may have collected it since.
        if (refs == 1 && !stored_now.count(k.sha) && !im.blobs.has(k.sha, k.size)) {
          retry = true;
          return fail(Errc::conflict, "a cached file's content was collected meanwhile; reading the files again");
        }
      }
    }
    if (auto r = im.ref_tree_locked(root); !r) return std::unexpected(r.error());
    info.id = random_checkpoint_id();
    info.created_at = now_iso8601();
    info.duration_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    db::Statement c(im.db,
                    "INSERT INTO checkpoints(id, workspace_id, principal, label, trigger, created_at, root, files, bytes, "
                    "new_bytes, trace_id, duration_us, skipped, skipped_count) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, "
                    "?10, ?11, ?12, ?13, ?14)");
    c.bind(1, info.id);
    c.bind(2, info.workspace_id);
    c.bind(3, info.principal);
    c.bind(4, info.label);
    c.bind(5, info.trigger);
    c.bind(6, info.created_at);
    c.bind(7, info.root);
    c.bind(8, info.files);
    c.bind(9, info.bytes);
    c.bind(10, info.new_bytes);
    c.bind(11, info.trace_id);
    c.bind(12, std::int64_t(info.duration_ms * 1000));
    c.bind(13, json(info.skipped).dump());
    c.bind(14, info.skipped_count);
    if (auto r = c.run("insert checkpoint"); !r) return std::unexpected(r.error());
  }

  // The stat cache learns what was hashed, and forgets paths that are gone. Its rows only ever
  // name blobs some tree holds: every hashed file is in this checkpoint (or the equal latest).
  auto& entries = (*cache)->entries;
  db::Statement up(im.db,
                   "INSERT INTO stat_cache(workspace_id, path, ino, size, mtime_ns, ctime_ns, sha, hashed_at_ns) VALUES "
                   "(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) ON CONFLICT(workspace_id, path) DO UPDATE SET ino = ?3, size = ?4, "
                   "mtime_ns = ?5, ctime_ns = ?6, sha = ?7, hashed_at_ns = ?8");
  db::Statement del(im.db, "DELETE FROM stat_cache WHERE workspace_id = ?1 AND path = ?2");
  auto forget = [&](std::string_view path) -> Result<void> {
    del.reset();
    del.bind(1, req.workspace_id);
    del.bind(2, path);
    if (auto r = del.run("forget stat cache entry"); !r) return std::unexpected(r.error());
    return {};
  };
  std::vector<std::pair<std::string, CacheEntry>> learned;
  for (const auto& m : misses) {
    const ScanNode& n = nodes[m.node];
    if (m.gone || n.entry.sha.empty()) continue;
    if (!m.cacheable) {
      if (auto r = forget(n.entry.path); !r) return std::unexpected(r.error());
      continue;
    }
    CacheEntry ce{n.ino, n.entry.size, n.mtime_ns, n.ctime_ns, n.entry.sha, started_ns};
    up.reset();
    up.bind(1, req.workspace_id);
    up.bind(2, n.entry.path);
    up.bind(3, ce.ino);
    up.bind(4, ce.size);
    up.bind(5, ce.mtime_ns);
    up.bind(6, ce.ctime_ns);
    up.bind(7, ce.sha);
    up.bind(8, ce.hashed_at_ns);
    if (auto r = up.run("update stat cache"); !r) return std::unexpected(r.error());
    learned.emplace_back(n.entry.path, std::move(ce));
  }
  std::vector<std::string> stale;
  if (partial) {
    // Only a file in a folder read again can have gone: those of removed_files not listed again.
    std::unordered_set<std::string_view> went(removed_files.begin(), removed_files.end());
    if (!went.empty())
      for (const auto& n : nodes)
        if (n.entry.type == EntryType::file) went.erase(n.entry.path);
    for (const auto& p : went)
      if (entries.count(std::string(p))) stale.emplace_back(p);
    for (const auto& p : stale)
      if (auto r = forget(p); !r) return std::unexpected(r.error());
  } else if (cache_size > hits) {  // some cached path was not hit: it changed (relearned) or went
    std::unordered_set<std::string_view> present;
    present.reserve(nodes.size());
    for (const auto& n : nodes)
      if (n.entry.type == EntryType::file) present.insert(n.entry.path);
    for (const auto& [path, e] : entries)
      if (!present.count(path)) stale.push_back(path);
    for (const auto& p : stale)
      if (auto r = forget(p); !r) return std::unexpected(r.error());
  }
  if (auto r = tx.commit(); !r) return std::unexpected(r.error());
  for (const auto& m : misses)
    if (!m.cacheable) entries.erase(nodes[m.node].entry.path);
  for (auto& [p, e] : learned) entries[p] = std::move(e);
  for (const auto& p : stale) entries.erase(p);
  // The next automatic checkpoint starts from this scan.
  wc->base.clear();
  wc->base.reserve(nodes.size());
  wc->linked_dirs.clear();
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (!gone.empty() && gone.count(i)) continue;
    if (nodes[i].entry.type == EntryType::file && nodes[i].nlink > 1) wc->linked_dirs.insert(parent_folder(nodes[i].entry.path));
    wc->base.push_back(std::move(nodes[i]));
  }
  wc->base_root = root;
  wc->base_valid = wc->watch != nullptr;
  if (latest) {
    latest->reused = true;
    return *latest;
  }
  return info;
}

}  // namespace

Result<CheckpointInfo> create_checkpoint_locked(CheckpointStore::Impl& im, const CheckpointRequest& req,
                                                std::stop_token stop) {
  bool retry = false;
  auto r = create_locked(im, req, stop, true, retry);
  if (!r && retry) {
    retry = false;
    r = create_locked(im, req, stop, false, retry);
  }
  return r;
}

Result<CheckpointInfo> CheckpointStore::create(const CheckpointRequest& req, std::stop_token stop) {
  if (!req.root) return fail(Errc::internal, "checkpoint without a workspace root");
  Result<CheckpointInfo> r;
  {
    auto wlock = impl_->workspace_lock(req.workspace_id);
    std::lock_guard guard(*wlock);
    impl_->finish_interrupted_restore(*req.root, req.workspace_id);
    r = create_checkpoint_locked(*impl_, req, stop);
  }
  if (r && !r->reused && r->trigger != "manual") (void)prune(req.workspace_id);
  return r;
}

}  // namespace kiln::workspace
