// The checkpoint store's records: the schema, listing, removal and pruning, and the reference
// counts that decide when a tree object or a blob is no longer held by any checkpoint.
#include "workspace/checkpoint_store.h"

#include <sodium.h>
#include <sys/stat.h>

#include <fmt/format.h>

#include "db/migrate.h"
#include "workspace/checkpoint_internal.h"
#include "workspace/state_store.h"

namespace kiln::workspace {

using json = nlohmann::json;

namespace {

// trees.refs: checkpoints whose root it is plus folder entries that name it. blob_refs.refs: folder
// entries (files and links) that name the blob. stat_cache holds only blobs some tree holds (a
// prune that frees a blob deletes its cache rows), so a cache hit always has its content stored.
constexpr const char* kSchemaV1 =
    "CREATE TABLE IF NOT EXISTS checkpoints ("
    "  seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE, workspace_id TEXT NOT NULL,"
    "  principal TEXT NOT NULL, label TEXT NOT NULL DEFAULT '', trigger TEXT NOT NULL, created_at TEXT NOT NULL,"
    "  root TEXT NOT NULL, files INTEGER NOT NULL, bytes INTEGER NOT NULL, new_bytes INTEGER NOT NULL,"
    "  trace_id TEXT NOT NULL DEFAULT '', duration_us INTEGER NOT NULL DEFAULT 0, skipped TEXT NOT NULL DEFAULT '[]',"
    "  skipped_count INTEGER NOT NULL DEFAULT 0);"
    "CREATE INDEX IF NOT EXISTS checkpoints_by_workspace ON checkpoints(workspace_id, seq);"
    "CREATE TABLE IF NOT EXISTS trees (sha TEXT PRIMARY KEY, refs INTEGER NOT NULL, data BLOB NOT NULL) WITHOUT ROWID;"
    "CREATE TABLE IF NOT EXISTS blob_refs (sha TEXT PRIMARY KEY, refs INTEGER NOT NULL) WITHOUT ROWID;"
    "CREATE TABLE IF NOT EXISTS stat_cache ("
    "  workspace_id TEXT NOT NULL, path TEXT NOT NULL, ino INTEGER NOT NULL, size INTEGER NOT NULL,"
    "  mtime_ns INTEGER NOT NULL, ctime_ns INTEGER NOT NULL, sha TEXT NOT NULL, hashed_at_ns INTEGER NOT NULL,"
    "  PRIMARY KEY (workspace_id, path)) WITHOUT ROWID;"
    "CREATE INDEX IF NOT EXISTS stat_cache_by_sha ON stat_cache(sha);"
    // A restore in progress: if the process dies, the next use of the workspace finishes it, so
    // the files end as the checkpoint said (checkpoint_before undoes it), never half-way.
    "CREATE TABLE IF NOT EXISTS restores ("
    "  workspace_id TEXT PRIMARY KEY, checkpoint_id TEXT NOT NULL, before_id TEXT NOT NULL, paths TEXT NOT NULL,"
    "  principal TEXT NOT NULL, started_at TEXT NOT NULL);";

constexpr db::Migration kSchema[] = {{1, kSchemaV1}};

}  // namespace

const char* const kCheckpointColumns =
    "id, workspace_id, principal, label, trigger, created_at, root, files, bytes, new_bytes, trace_id, duration_us, "
    "skipped, skipped_count, seq";

CheckpointInfo read_checkpoint_row(db::Statement& s) {
  CheckpointInfo c;
  c.id = s.text(0);
  c.workspace_id = s.text(1);
  c.principal = s.text(2);
  c.label = s.text(3);
  c.trigger = s.text(4);
  c.created_at = s.text(5);
  c.root = s.text(6);
  c.files = std::uint64_t(s.int64(7));
  c.bytes = std::uint64_t(s.int64(8));
  c.new_bytes = std::uint64_t(s.int64(9));
  c.trace_id = s.text(10);
  c.duration_ms = double(s.int64(11)) / 1000.0;
  auto sk = json::parse(s.text(12), nullptr, false);
  if (sk.is_array())
    for (const auto& x : sk)
      if (x.is_string()) c.skipped.push_back(x.get<std::string>());
  c.skipped_count = std::uint64_t(s.int64(13));
  return c;
}

namespace {
bool automatic(const std::string& trigger) { return trigger != "manual"; }
}  // namespace

std::string random_checkpoint_id() {
  unsigned char b[10];
  randombytes_buf(b, sizeof b);
  std::string out = "cp_";
  for (unsigned char c : b) out += fmt::format("{:02x}", c);
  return out;
}

json CheckpointInfo::to_json() const {
  json j = {{"checkpoint_id", id},  {"label", label},     {"trigger", trigger}, {"created_at", created_at},
            {"files", files},       {"bytes", bytes},     {"new_bytes", new_bytes},
            {"duration_ms", duration_ms}, {"trace_id", trace_id.empty() ? json(nullptr) : json(trace_id)},
            {"workspace_id", workspace_id}};
  if (skipped_count) j["skipped"] = {{"count", skipped_count}, {"paths", skipped}};
  if (reused) j["reused"] = true;
  return j;
}

json RunChanges::to_json() const {
  json j = {{"added", added},
            {"modified", modified},
            {"deleted", deleted},
            {"paths", paths},
            {"checkpoint_before", checkpoint_before},
            {"checkpoint_after", checkpoint_after}};
  if (paths_truncated) j["paths_truncated"] = true;
  return j;
}

CheckpointStore::CheckpointStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CheckpointStore::~CheckpointStore() = default;

Result<std::unique_ptr<CheckpointStore>> CheckpointStore::open(const std::string& state_dir) {
  if (sodium_init() < 0) return fail(Errc::internal, "libsodium could not be initialised");
  auto blobs = blobs::BlobStore::open(state_dir);
  if (!blobs) return std::unexpected(blobs.error());
  auto impl = std::make_unique<Impl>(state_dir);
  auto db = db::Database::open(state_dir + "/checkpoints.db",
                               {.label = "checkpoint", .busy_timeout_ms = 10000, .private_file = true, .schema = kSchema});
  if (!db) return std::unexpected(db.error());
  impl->db = std::move(*db);
  return std::unique_ptr<CheckpointStore>(new CheckpointStore(std::move(impl)));
}

const blobs::BlobStore& CheckpointStore::blob_store() const { return impl_->blobs; }

void CheckpointStore::set_blob_referrer(BlobReferrer referrer) {
  std::lock_guard lock(impl_->mu);
  impl_->referrer = std::move(referrer);
}

Result<bool> CheckpointStore::references(const std::string& sha) {
  std::lock_guard lock(impl_->mu);
  db::Statement s(impl_->db, "SELECT 1 FROM blob_refs WHERE sha = ?1 AND refs > 0");
  s.bind(1, sha);
  return s.next("select blob_refs");
}

std::shared_ptr<std::mutex> CheckpointStore::Impl::workspace_lock(const std::string& ws) {
  std::lock_guard lock(ws_mu);
  auto& m = ws_locks[ws];
  if (!m) m = std::make_shared<std::mutex>();
  return m;
}

std::optional<std::string> CheckpointStore::Impl::load_tree(const std::string& sha) {
  std::lock_guard lock(mu);
  db::Statement s(db, "SELECT data FROM trees WHERE sha = ?1");
  s.bind(1, sha);
  auto more = s.next("select tree");
  if (!more || !*more) return std::nullopt;
  return s.text(0);
}

Result<CheckpointInfo> CheckpointStore::Impl::row(const std::string& id, const std::string& principal) {
  std::lock_guard lock(mu);
  db::Statement s(db, fmt::format("SELECT {} FROM checkpoints WHERE id = ?1", kCheckpointColumns));
  s.bind(1, id);
  auto more = s.next("select checkpoint");
  if (!more) return std::unexpected(more.error());
  // Another principal's checkpoint gets exactly the error a missing one gets.
  if (!*more || (!principal.empty() && s.text(2) != principal))
    return fail(Errc::not_found, fmt::format("no checkpoint {} (checkpoint_list shows this workspace's)", id));
  return read_checkpoint_row(s);
}

Result<CheckpointInfo> CheckpointStore::get(const std::string& id, const std::string& principal) {
  return impl_->row(id, principal);
}

Result<CheckpointStore::Page> CheckpointStore::list(const std::string& workspace_id, const std::string& principal,
                                                    std::size_t limit, const std::string& cursor) {
  std::int64_t before = INT64_MAX;
  if (!cursor.empty()) {
    try {
      before = std::stoll(cursor);
    } catch (...) {
      return fail(Errc::invalid_argument, "cursor is not one checkpoint_list returned; pass its next_cursor");
    }
  }
  limit = std::clamp<std::size_t>(limit, 1, 1000);
  std::lock_guard lock(impl_->mu);
  db::Statement s(impl_->db,
                  fmt::format("SELECT {} FROM checkpoints WHERE workspace_id = ?1 AND (?2 = '' OR principal = ?2) "
                              "AND seq < ?3 ORDER BY seq DESC LIMIT ?4",
                              kCheckpointColumns));
  s.bind(1, workspace_id);
  s.bind(2, principal);
  s.bind(3, before);
  s.bind(4, std::int64_t(limit + 1));
  Page page;
  std::int64_t last = 0;
  if (auto r = s.each("list checkpoints", [&] {
        if (page.checkpoints.size() == limit) {
          page.next_cursor = std::to_string(last);
          return;
        }
        page.checkpoints.push_back(read_checkpoint_row(s));
        last = s.int64(14);
      });
      !r)
    return std::unexpected(r.error());
  return page;
}

Result<void> CheckpointStore::Impl::ref_tree_locked(const std::string& sha) {
  db::Statement s(db, "UPDATE trees SET refs = refs + 1 WHERE sha = ?1");
  s.bind(1, sha);
  auto n = s.run("reference tree");
  if (!n) return std::unexpected(n.error());
  if (*n != 1) return fail(Errc::internal, fmt::format("checkpoint store: tree {} is missing", sha));
  return {};
}

Result<void> CheckpointStore::Impl::unref_tree_locked(const std::string& root, std::vector<std::string>& freed) {
  std::vector<std::string> pending{root};
  db::Statement dec(db, "UPDATE trees SET refs = refs - 1 WHERE sha = ?1 RETURNING refs, data");
  db::Statement del(db, "DELETE FROM trees WHERE sha = ?1");
  db::Statement bdec(db, "UPDATE blob_refs SET refs = refs - 1 WHERE sha = ?1 RETURNING refs");
  db::Statement bdel(db, "DELETE FROM blob_refs WHERE sha = ?1");
  db::Statement cdel(db, "DELETE FROM stat_cache WHERE sha = ?1");
  while (!pending.empty()) {
    std::string sha = std::move(pending.back());
    pending.pop_back();
    dec.reset();
    dec.bind(1, sha);
    auto got = dec.next("release tree");
    if (!got) return std::unexpected(got.error());
    if (!*got) continue;  // already gone: nothing more to release
    std::int64_t left = dec.int64(0);
    std::string data = dec.text(1);
    (void)dec.next("release tree");
    if (left > 0) continue;
    del.reset();
    del.bind(1, sha);
    if (auto r = del.run("delete tree"); !r) return std::unexpected(r.error());
    auto kids = decode_tree(data);
    if (!kids) return std::unexpected(kids.error());
    for (const auto& k : *kids) {
      if (k.type == EntryType::dir) {
        pending.push_back(k.sha);
        continue;
      }
      bdec.reset();
      bdec.bind(1, k.sha);
      auto b = bdec.next("release blob");
      if (!b) return std::unexpected(b.error());
      if (!*b) continue;
      std::int64_t bl = bdec.int64(0);
      (void)bdec.next("release blob");
      if (bl > 0) continue;
      for (db::Statement* st : {&bdel, &cdel}) {
        st->reset();
        st->bind(1, k.sha);
        if (auto r = st->run("delete blob reference"); !r) return std::unexpected(r.error());
      }
      freed.push_back(k.sha);
    }
  }
  return {};
}

void CheckpointStore::Impl::collect(const std::vector<std::string>& freed) {
  if (freed.empty()) return;
  auto hold = blobs.lock_exclusive();
  if (!hold) return;  // the blobs stay (a leak, never a loss)
  std::set<std::string> gone;
  {
    std::lock_guard lock(mu);
    db::Statement s(db, "SELECT 1 FROM blob_refs WHERE sha = ?1 AND refs > 0");
    for (const auto& sha : freed) {
      s.reset();
      s.bind(1, sha);
      auto again = s.next("select blob_refs");  // a checkpoint since may hold it again
      if (!again || *again) continue;
      gone.insert(sha);
    }
    for (auto& [ws, cache] : caches)
      for (auto it = cache.entries.begin(); it != cache.entries.end();)
        it = gone.count(it->second.sha) ? cache.entries.erase(it) : std::next(it);
  }
  BlobReferrer other;
  {
    std::lock_guard lock(mu);
    other = referrer;
  }
  for (const auto& sha : gone) {
    if (other) {
      auto held = other(sha);
      if (!held || *held) continue;
    }
    blobs.remove(sha);
  }
}

Result<void> CheckpointStore::Impl::remove_locked(const CheckpointInfo& c, std::vector<std::string>& freed) {
  db::Statement d(db, "DELETE FROM checkpoints WHERE id = ?1");
  d.bind(1, c.id);
  if (auto r = d.run("delete checkpoint"); !r) return std::unexpected(r.error());
  return unref_tree_locked(c.root, freed);
}

Result<void> CheckpointStore::remove(const std::string& id, const std::string& principal) {
  auto c = impl_->row(id, principal);
  if (!c) return std::unexpected(c.error());
  std::vector<std::string> freed;
  {
    std::lock_guard lock(impl_->mu);
    db::Transaction tx(impl_->db);
    if (auto r = tx.begin(); !r) return std::unexpected(r.error());
    if (auto r = impl_->remove_locked(*c, freed); !r) return r;
    if (auto r = tx.commit(); !r) return r;
  }
  impl_->collect(freed);
  return {};
}

Result<std::size_t> CheckpointStore::prune(const std::string& workspace_id) {
  std::vector<std::string> freed;
  std::size_t removed = 0;
  {
    std::lock_guard lock(impl_->mu);
    std::vector<CheckpointInfo> old;
    db::Statement s(impl_->db, fmt::format("SELECT {} FROM checkpoints WHERE workspace_id = ?1 AND trigger != 'manual' "
                                           "ORDER BY seq DESC LIMIT -1 OFFSET ?2",
                                           kCheckpointColumns));
    s.bind(1, workspace_id);
    s.bind(2, std::int64_t(kKeepAutomatic));
    if (auto r = s.each("select old checkpoints", [&] { old.push_back(read_checkpoint_row(s)); }); !r)
      return std::unexpected(r.error());
    if (old.empty()) return 0;
    db::Transaction tx(impl_->db);
    if (auto r = tx.begin(); !r) return std::unexpected(r.error());
    for (const auto& c : old) {
      if (!automatic(c.trigger)) continue;
      if (auto r = impl_->remove_locked(c, freed); !r) return std::unexpected(r.error());
      ++removed;
    }
    if (auto r = tx.commit(); !r) return std::unexpected(r.error());
  }
  impl_->collect(freed);
  return removed;
}

Result<FlatTree> CheckpointStore::files(const std::string& id) {
  auto c = impl_->row(id, {});
  if (!c) return std::unexpected(c.error());
  return flatten(c->root, impl_->loader());
}

Result<RunChanges> CheckpointStore::changes(const std::string& before_id, const std::string& after_id) {
  auto a = impl_->row(before_id, {});
  if (!a) return std::unexpected(a.error());
  auto b = impl_->row(after_id, {});
  if (!b) return std::unexpected(b.error());
  auto diff = compare_stored(a->root, b->root, impl_->loader());
  if (!diff) return std::unexpected(diff.error());
  RunChanges out;
  out.checkpoint_before = before_id;
  out.checkpoint_after = after_id;
  for (const auto& c : *diff) {
    (c.kind == TreeChange::Kind::added ? out.added : c.kind == TreeChange::Kind::deleted ? out.deleted : out.modified)++;
    if (out.paths.size() < kMaxChangePaths) out.paths.push_back({{"path", c.path}, {"change", to_string(c.kind)}});
    else out.paths_truncated = true;
  }
  return out;
}

}  // namespace kiln::workspace
