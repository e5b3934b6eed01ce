// checkpoint_restore: the workspace (or some paths of it) made as a checkpoint says. Each file is
// replaced whole (a temp file beside it, renamed over), every step goes through folder descriptors
// opened without following links, and a journal row lets the next use finish a restore that a
// killed process left half-done; the state before is a checkpoint of its own, so it can be undone.
#include <fcntl.h>
#include <sodium.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <unordered_map>

#include <fmt/format.h>

#include "core/fd_io.h"
#include "workspace/checkpoint_internal.h"
#include "workspace/state_store.h"

namespace kiln::workspace {

using json = nlohmann::json;

namespace {

bool in_scope(std::string_view path, const std::vector<std::string>& scope) {
  if (scope.empty()) return true;
  for (const auto& s : scope)
    if (s.empty() || path == s || (path.size() > s.size() && path.starts_with(s) && path[s.size()] == '/')) return true;
  // The folders on the way to a scoped path are part of it (they must exist to hold it).
  for (const auto& s : scope)
    if (s.size() > path.size() && s.starts_with(path) && s[path.size()] == '/') return true;
  return false;
}

std::pair<std::string, std::string> split(const std::string& path) {
  auto slash = path.rfind('/');
  if (slash == std::string::npos) return {"", path};
  return {path.substr(0, slash), path.substr(slash + 1)};
}

// Opens folder `rel` beneath the root one component at a time with O_NOFOLLOW: a link where a
// folder should be is refused, never followed.
class Dirs {
 public:
  explicit Dirs(const Root& root) : root_(root) {}
  Result<int> open(const std::string& rel) {
    if (rel == cached_rel_ && cached_) return cached_.get();
    UniqueFd cur(::openat(root_.fd(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!cur) return fail(Errc::io, fmt::format("cannot open the workspace: {}", std::strerror(errno)));
    std::size_t at = 0;
    while (at < rel.size()) {
      auto slash = rel.find('/', at);
      std::string part = rel.substr(at, slash == std::string::npos ? std::string::npos : slash - at);
      at = slash == std::string::npos ? rel.size() : slash + 1;
      int fd = ::openat(cur.get(), part.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (fd < 0)
        return fail(errno == ENOENT ? Errc::not_found : Errc::path_escape,
                    fmt::format("cannot open folder '{}' of the workspace: {}", rel, std::strerror(errno)));
      cur.reset(fd);
    }
    cached_rel_ = rel;
    cached_ = std::move(cur);
    return cached_.get();
  }
  void forget() {
    cached_.reset();
    cached_rel_.clear();
  }

 private:
  const Root& root_;
  std::string cached_rel_;
  UniqueFd cached_;
};

// The mode a restore gives: the recorded one without set-user-id and set-group-id. Kiln run as
// root would otherwise make a setuid-root program of a file its user had marked setuid for
// themselves (the house rule of SANDBOX_CASES case 31: no set-id file is ever made).
mode_t restorable_mode(std::uint32_t mode) { return mode_t(mode & 07777 & ~mode_t(S_ISUID | S_ISGID)); }

std::string temp_name() {
  return fmt::format(".kiln-restore.{:08x}{:08x}", randombytes_random(), randombytes_random());
}

struct Plan {
  std::vector<const TreeEntry*> remove;  // deepest first
  std::vector<const TreeEntry*> write;   // tree order: folders before their contents
  std::vector<const TreeEntry*> chmod_only;
};

Plan plan(const FlatTree& now, const FlatTree& target) {
  Plan p;
  std::unordered_map<std::string_view, const TreeEntry*> t, n;
  for (const auto& e : target) t.emplace(e.path, &e);
  for (const auto& e : now) n.emplace(e.path, &e);
  for (auto it = now.rbegin(); it != now.rend(); ++it) {
    auto m = t.find(it->path);
    if (m == t.end() || m->second->type != it->type) p.remove.push_back(&*it);
  }
  for (const auto& e : target) {
    auto m = n.find(e.path);
    bool same_type = m != n.end() && m->second->type == e.type;
    if (!same_type) {
      p.write.push_back(&e);
    } else if (e.type != EntryType::dir && m->second->sha != e.sha) {
      p.write.push_back(&e);
    } else if (e.type != EntryType::symlink && m->second->mode != e.mode) {
      p.chmod_only.push_back(&e);
    }
  }
  return p;
}

Result<void> write_file(const blobs::BlobStore& blobs, int dir, const std::string& name, const TreeEntry& e) {
  UniqueFd in(::open(blobs.path(e.sha).c_str(), O_RDONLY | O_CLOEXEC));
  if (!in) return fail(Errc::internal, fmt::format("checkpoint store: the content of '{}' is missing", e.path));
  const std::string tmp = temp_name();
  UniqueFd out(::openat(dir, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!out) return fail(Errc::io, fmt::format("cannot write '{}': {}", e.path, std::strerror(errno)));
  off_t off = 0;
  std::uint64_t left = e.size;
  while (left > 0) {
    ssize_t n = ::sendfile(out.get(), in.get(), &off, std::size_t(std::min<std::uint64_t>(left, 1 << 30)));
    if (n <= 0) {
      int err = n < 0 ? errno : EIO;
      ::unlinkat(dir, tmp.c_str(), 0);
      return fail(Errc::io, fmt::format("cannot write '{}': {}{}", e.path, std::strerror(err),
                                        err == ENOSPC ? "; free space on the workspace's disk and restore again" : ""));
    }
    left -= std::uint64_t(n);
  }
  if (::fchmod(out.get(), restorable_mode(e.mode)) != 0 || ::renameat(dir, tmp.c_str(), dir, name.c_str()) != 0) {
    int err = errno;
    ::unlinkat(dir, tmp.c_str(), 0);
    return fail(Errc::io, fmt::format("cannot put '{}' back: {}", e.path, std::strerror(err)));
  }
  return {};
}

Result<void> write_link(const blobs::BlobStore& blobs, int dir, const std::string& name, const TreeEntry& e) {
  UniqueFd in(::open(blobs.path(e.sha).c_str(), O_RDONLY | O_CLOEXEC));
  if (!in) return fail(Errc::internal, fmt::format("checkpoint store: the target of link '{}' is missing", e.path));
  std::string target(std::size_t(e.size) + 1, '\0');
  ssize_t n = read_full(in.get(), target.data(), target.size());
  if (n < 0 || std::uint64_t(n) != e.size) return fail(Errc::internal, fmt::format("checkpoint store: link '{}' is damaged", e.path));
  target.resize(std::size_t(n));
  const std::string tmp = temp_name();
  if (::symlinkat(target.c_str(), dir, tmp.c_str()) != 0 || ::renameat(dir, tmp.c_str(), dir, name.c_str()) != 0) {
    int err = errno;
    ::unlinkat(dir, tmp.c_str(), 0);
    return fail(Errc::io, fmt::format("cannot put link '{}' back: {}", e.path, std::strerror(err)));
  }
  return {};
}

// Applies the plan. Idempotent: running it again after an interruption ends in the same state.
Result<RestoreResult> apply(const blobs::BlobStore& blobs, const Root& root, const FlatTree& now, const FlatTree& target,
                            bool dry_run) {
  Plan p = plan(now, target);
  RestoreResult out;
  out.dry_run = dry_run;
  for (const auto* e : p.remove) out.deleted.push_back(e->path);
  for (const auto* e : p.write)
    if (e->type != EntryType::dir) out.restored.push_back(e->path);
  for (const auto* e : p.chmod_only) out.restored.push_back(e->path);
  std::sort(out.restored.begin(), out.restored.end(), [](const auto& a, const auto& b) { return path_less(a, b); });
  std::sort(out.deleted.begin(), out.deleted.end(), [](const auto& a, const auto& b) { return path_less(a, b); });
  if (dry_run) return out;
  Dirs dirs(root);
  std::vector<std::string> kept;
  for (const auto* e : p.remove) {
    auto [parent, name] = split(e->path);
    auto d = dirs.open(parent);
    if (!d) {
      if (d.error().code == Errc::not_found) continue;  // its folder went already
      return std::unexpected(d.error());
    }
    if (::unlinkat(*d, name.c_str(), e->type == EntryType::dir ? AT_REMOVEDIR : 0) != 0) {
      if (errno == ENOENT) continue;
      if (e->type == EntryType::dir && (errno == ENOTEMPTY || errno == EEXIST)) {
        kept.push_back(e->path);  // it holds files checkpoints do not capture (ignored ones)
        continue;
      }
      return fail(Errc::io, fmt::format("cannot remove '{}': {}", e->path, std::strerror(errno)));
    }
    if (e->type == EntryType::dir) dirs.forget();
  }
  for (const auto* e : p.write) {
    auto [parent, name] = split(e->path);
    auto d = dirs.open(parent);
    if (!d) return std::unexpected(d.error());
    Result<void> r;
    if (e->type == EntryType::dir) {
      if (::mkdirat(*d, name.c_str(), 0700) != 0 && errno != EEXIST)
        return fail(Errc::io, fmt::format("cannot create folder '{}': {}", e->path, std::strerror(errno)));
      // The mode through a descriptor of the folder itself, opened without following: what is
      // there may have been swapped for a link since the mkdir (or was one, EEXIST), and a chmod
      // by name would change the link's target outside the workspace.
      UniqueFd made(::openat(*d, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!made)
        return fail(errno == ENOENT ? Errc::not_found : Errc::path_escape,
                    fmt::format("cannot restore folder '{}': {}", e->path, std::strerror(errno)));
      (void)::fchmod(made.get(), restorable_mode(e->mode));
    } else if (e->type == EntryType::symlink) {
      r = write_link(blobs, *d, name, *e);
    } else {
      r = write_file(blobs, *d, name, *e);
    }
    if (!r) {
      if (std::find(kept.begin(), kept.end(), e->path) != kept.end())
        return fail(Errc::conflict, fmt::format("cannot restore '{}': a folder there holds ignored files; move them away "
                                                "and restore again",
                                                e->path));
      return std::unexpected(r.error());
    }
  }
  for (const auto* e : p.chmod_only) {
    auto [parent, name] = split(e->path);
    auto d = dirs.open(parent);
    if (!d) return std::unexpected(d.error());
    // Folders and files only (links have no mode of their own); the entry was checked a moment
    // ago, and O_NOFOLLOW-opened parents keep this inside the workspace.
    int fd = ::openat(*d, name.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0) {
      struct stat st {};
      bool linked = false;
      if (::fstat(fd, &st) == 0 && !S_ISLNK(st.st_mode)) {
        // A file with other hard links shares its inode (and so its mode) with names that may be
        // outside the workspace: it gets a copy of its own instead of a chmod.
        if (S_ISREG(st.st_mode) && st.st_nlink > 1) linked = true;
        else ::chmod(fmt::format("/proc/self/fd/{}", fd).c_str(), restorable_mode(e->mode));
      }
      ::close(fd);
      if (linked)
        if (auto w = write_file(blobs, *d, name, *e); !w) return std::unexpected(w.error());
    }
  }
  out.kept = std::move(kept);
  return out;
}

FlatTree scoped(FlatTree t, const std::vector<std::string>& scope) {
  if (scope.empty()) return t;
  std::erase_if(t, [&](const TreeEntry& e) { return !in_scope(e.path, scope); });
  return t;
}

}  // namespace

void CheckpointStore::Impl::finish_interrupted_restore(const Root& root, const std::string& workspace_id) {
  std::string target_id, paths_text;
  {
    std::lock_guard lock(mu);
    db::Statement s(db, "SELECT checkpoint_id, paths FROM restores WHERE workspace_id = ?1");
    s.bind(1, workspace_id);
    auto more = s.next("select restore journal");
    if (!more || !*more) return;
    target_id = s.text(0);
    paths_text = s.text(1);
  }
  std::vector<std::string> scope;
  auto pj = json::parse(paths_text, nullptr, false);
  if (pj.is_array())
    for (const auto& p : pj)
      if (p.is_string()) scope.push_back(p.get<std::string>());
  if (auto target = row(target_id, {})) {
    auto t = flatten(target->root, loader());
    auto now = snapshot_now(*this, root, workspace_id, {});
    if (t && now) (void)apply(blobs, root, scoped(std::move(*now), scope), scoped(std::move(*t), scope), false);
  }
  std::lock_guard lock(mu);
  db::Statement d(db, "DELETE FROM restores WHERE workspace_id = ?1");
  d.bind(1, workspace_id);
  (void)d.run("finish restore journal");
}

void CheckpointStore::recover(const Root& root, const std::string& workspace_id) {
  auto wlock = impl_->workspace_lock(workspace_id);
  std::lock_guard guard(*wlock);
  impl_->finish_interrupted_restore(root, workspace_id);
}

Result<RestoreResult> CheckpointStore::restore(const RestoreRequest& req, std::stop_token stop) {
  if (!req.root) return fail(Errc::internal, "restore without a workspace root");
  auto target = impl_->row(req.checkpoint_id, req.principal);
  if (!target) return std::unexpected(target.error());
  if (target->workspace_id != req.workspace_id)
    return fail(Errc::not_found, fmt::format("no checkpoint {} in this workspace (checkpoint_list shows its checkpoints)",
                                             req.checkpoint_id));
  std::vector<std::string> scope;
  for (const auto& p : req.paths) {
    auto rel = req.root->relative(p);
    if (!rel) return std::unexpected(rel.error());
    scope.push_back(*rel);
  }
  if (std::find(scope.begin(), scope.end(), std::string()) != scope.end()) scope.clear();  // "." is everything
  auto wlock = impl_->workspace_lock(req.workspace_id);
  std::lock_guard guard(*wlock);
  impl_->finish_interrupted_restore(*req.root, req.workspace_id);
  auto t = flatten(target->root, impl_->loader());
  if (!t) return std::unexpected(t.error());
  FlatTree goal = scoped(std::move(*t), scope);
  if (req.dry_run) {
    auto now = snapshot_now(*impl_, *req.root, req.workspace_id, stop);
    if (!now) return std::unexpected(now.error());
    return apply(impl_->blobs, *req.root, scoped(std::move(*now), scope), goal, true);
  }
  // The state before, so the restore can be undone; it is also exactly what the plan compares.
  CheckpointRequest before;
  before.root = req.root;
  before.workspace_id = req.workspace_id;
  before.principal = req.principal;
  before.trigger = "restore";
  before.label = fmt::format("before restoring {}", req.checkpoint_id);
  auto b = create_checkpoint_locked(*impl_, before, stop);
  if (!b) return std::unexpected(b.error());
  auto now = flatten(b->root, impl_->loader());
  if (!now) return std::unexpected(now.error());
  {
    std::lock_guard lock(impl_->mu);
    db::Statement j(impl_->db,
                    "INSERT OR REPLACE INTO restores(workspace_id, checkpoint_id, before_id, paths, principal, started_at) "
                    "VALUES (?1, ?2, ?3, ?4, ?5, ?6)");
    j.bind(1, req.workspace_id);
    j.bind(2, req.checkpoint_id);
    j.bind(3, b->id);
    j.bind(4, json(scope).dump());
    j.bind(5, req.principal);
    j.bind(6, now_iso8601());
    if (auto r = j.run("write restore journal"); !r) return std::unexpected(r.error());
  }
  // Killed in here, the journal stays and the next use of the workspace finishes the restore.
  auto r = apply(impl_->blobs, *req.root, scoped(std::move(*now), scope), goal, false);
  {
    std::lock_guard lock(impl_->mu);
    db::Statement d(impl_->db, "DELETE FROM restores WHERE workspace_id = ?1");
    d.bind(1, req.workspace_id);
    (void)d.run("finish restore journal");
  }
  if (!r)
    return fail(r.error().code, fmt::format("{} (the restore stopped part-way; checkpoint_restore {} puts back the state "
                                            "before it)",
                                            r.error().message, b->id));
  r->checkpoint_before = b->id;
  return r;
}

}  // namespace kiln::workspace
