// Publishing: copying a workspace folder or file into the content-addressed blob store (read only
// through workspace::Root, symlinks never followed) and recording the version in one transaction.
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <stop_token>

#include <fmt/format.h>

#include "artifacts/artifact_internal.h"
#include "core/fd_io.h"
#include "core/owner_tag.h"
#include "workspace/root.h"
#include "workspace/state_store.h"
#include "workspace/tree_walk.h"

namespace kiln::artifacts {

namespace {

Error too_large_bytes(const std::string& shown, std::uint64_t max) {
  return Error{Errc::too_large, fmt::format("'{}' holds more than {} MiB; a version holds at most that much: publish "
                                            "a smaller folder (the built site, not the project)",
                                            shown, max >> 20)};
}

}  // namespace

Result<ArtifactStore::Staged> ArtifactStore::stage(const PublishRequest& req, const std::string& rel, bool single_file,
                                                   std::vector<std::string>& added) {
  std::uint64_t max_files, max_bytes;
  {
    std::lock_guard lock(mu_);
    max_files = max_files_;
    max_bytes = max_bytes_;
  }
  const workspace::Root& root = *req.root;
  const std::string shown = rel.empty() ? std::string(".") : rel;
  Staged st;
  std::vector<std::pair<std::string, std::string>> found;  // path in the root, path in the version
  if (single_file) {
    auto slash = rel.rfind('/');
    found.emplace_back(rel, slash == std::string::npos ? rel : rel.substr(slash + 1));
  } else {
    workspace::WalkOptions o;
    o.start = rel;
    // The workspace root is a project (node_modules, build output): publish what git would.
    // A subfolder was named on purpose, so it is published whole, ignored or not.
    o.include_ignored = !rel.empty();
    std::stop_source stop;
    std::mutex mu;
    std::atomic<std::uint64_t> files{0}, bytes{0}, links{0}, other{0};
    std::atomic<bool> over_files{false}, over_bytes{false};
    auto r = workspace::walk(root, o, stop.get_token(), [&](const workspace::WalkEntry& e, unsigned) {
      if (e.type == workspace::EntryType::symlink) {
        ++links;
        return;
      }
      if (e.type == workspace::EntryType::other) ++other;
      if (e.type != workspace::EntryType::file) return;
      struct stat s {};
      std::uint64_t size = ::fstatat(e.dir_fd, e.name.data(), &s, AT_SYMLINK_NOFOLLOW) == 0 ? std::uint64_t(s.st_size) : 0;
      if (++files > max_files) over_files = true;
      if ((bytes += size) > max_bytes) over_bytes = true;
      if (over_files || over_bytes) {
        stop.request_stop();
        return;
      }
      std::string path(e.path);
      std::lock_guard lock(mu);
      found.emplace_back(path, rel.empty() ? path : path.substr(rel.size() + 1));
    });
    if (over_files) {
      return fail(Errc::too_large, fmt::format("'{}' holds more than {} files; a version holds at most that many: "
                                               "publish a smaller folder (the built site, not the project)",
                                               shown, max_files));
    }
    if (over_bytes) return std::unexpected(too_large_bytes(shown, max_bytes));
    if (!r) return std::unexpected(r.error());
    st.skipped_symlinks = links;
    st.skipped_other = other;
    if (found.empty()) {
      return fail(Errc::invalid_argument,
                  fmt::format("'{}' holds no files to publish{}", shown,
                              links ? fmt::format(" ({} symlinks skipped: links are never followed)", links.load()) : ""));
    }
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.second < b.second; });

  const blobs::WriteFailure write_failure = [this](int err) { return detail::write_failure(dir_, err); };
  // A copy that fails half-way (a full disk) gives back the blobs it added (publish drops them once
  // it let go of the shared lock): nothing references them.
  for (const auto& [in_root, in_version] : found) {
    // O_NOFOLLOW: a file swapped for a symlink since the walk is skipped like any other link.
    auto fd = root.open(in_root, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (!fd) {
      if (fd.error().code == Errc::path_escape) {
        ++st.skipped_symlinks;
        continue;
      }
      if (fd.error().code == Errc::not_found) continue;  // deleted since the walk
      return std::unexpected(fd.error());
    }
    struct stat s {};
    if (::fstat(fd->get(), &s) != 0 || !S_ISREG(s.st_mode)) {
      ++st.skipped_other;
      continue;
    }
    auto blob = blobs_.put(fd->get(), max_bytes - st.bytes, in_root, write_failure);
    if (!blob && blob.error().code == Errc::too_large) return std::unexpected(too_large_bytes(shown, max_bytes));
    if (!blob) return std::unexpected(blob.error());
    st.bytes += blob->size;
    if (blob->is_new) {
      ++st.new_blobs;
      added.push_back(blob->sha256);
    }
    st.files.push_back(StagedFile{in_version, blob->sha256, blob->size});
  }
  if (st.files.empty()) return fail(Errc::invalid_argument, fmt::format("'{}' holds no regular files to publish", shown));
  // One flush for the whole version instead of an fsync per file: the version row that makes
  // the blobs reachable is committed only after their bytes are on disk.
  if (st.new_blobs > 0) blobs_.sync();
  return st;
}

Result<PublishResult> ArtifactStore::publish(const PublishRequest& req) {
  if (!req.root) return fail(Errc::internal, "publish without a workspace root");
  auto rel = req.root->relative(req.path.empty() ? std::string_view(".") : std::string_view(req.path));
  if (!rel) return std::unexpected(rel.error());
  auto folder = workspace::is_folder_beneath(*req.root, *rel, req.path);
  if (!folder) return std::unexpected(folder.error());
  if (req.app && !*folder)
    return fail(Errc::invalid_argument, fmt::format("'{}' is a file; only a folder can be published as an app (it holds "
                                                    "the server and what it serves)",
                                                    req.path));
  if (req.app && !req.app->is_object()) return fail(Errc::internal, "publish: the app configuration is not an object");
  const std::string name = req.name.empty() ? default_artifact_name(*rel, req.root->path()) : req.name;
  if (!valid_artifact_name(name)) {
    return fail(Errc::invalid_argument, fmt::format("artifact name '{}' is not usable in a URL: use 1-64 of a-z, 0-9 "
                                                    "and '-', starting with a letter or digit",
                                                    name));
  }
  ShareChange change;
  change.share = req.share;
  change.invite_names = req.invite_names;
  change.expires_in_s = req.expires_in_s;
  change.invite_expires_in_s = req.invite_expires_in_s;
  {
    // Fail before copying anything when the share request cannot apply.
    std::lock_guard lock(mu_);
    auto row = row_locked(name);
    if (!row) return std::unexpected(row.error());
    if (*row && (*row)->workspace_id != req.workspace_id) {
      return fail(Errc::conflict, fmt::format("artifact {} belongs to another workspace; pass another name", name));
    }
    Share mode = req.share.value_or(*row ? (*row)->share : Share::public_);
    if (!req.share && !req.password.empty()) mode = Share::password;
    if (mode == Share::password && req.password.empty() && !(*row && (*row)->password_hash && (*row)->share == mode)) {
      return fail(Errc::invalid_argument, "share \"password\" needs a password: pass password");
    }
  }
  if (!req.password.empty()) {
    auto hash = hash_password(req.password);
    if (!hash) return std::unexpected(hash.error());
    change.password_hash = std::move(*hash);
  }
  for (int attempt = 0;; ++attempt) {
    // Held from the first blob relied on until the version row is committed: no checkpoint prune
    // or unpublish (they lock exclusively) can collect a blob in between.
    auto hold = blobs_.lock_shared();
    if (!hold) return std::unexpected(hold.error());
    std::vector<std::string> added;
    auto staged = stage(req, *rel, !*folder, added);
    if (!staged) {
      *hold = blobs::BlobLock();
      drop_unreferenced(added);
      return std::unexpected(staged.error());
    }
    std::lock_guard lock(mu_);
    db::Transaction tx(db_);
    if (auto r = tx.begin(); !r) return std::unexpected(r.error());
    // An unpublish in another process may have collected a blob this copy deduplicated against;
    // under the write lock no collection can start, so checking once here is enough.
    bool all_there = std::all_of(staged->files.begin(), staged->files.end(), [&](const StagedFile& f) {
      struct stat s {};
      return ::stat(blob_path(f.sha256).c_str(), &s) == 0;
    });
    if (!all_there) {
      if (attempt < 2) continue;
      return fail(Errc::conflict, "the blob store changed during the publish three times; try again");
    }
    auto row = row_locked(name);
    if (!row) return std::unexpected(row.error());
    const std::string now_iso = workspace::now_iso8601();
    if (!*row) {
      // A name published before and removed whole goes on numbering where it stopped.
      db::Statement ins(db_,
                        "INSERT INTO artifacts(name, workspace_id, share, created_at, next_version) VALUES (?1, ?2, "
                        "'public', ?3, coalesce((SELECT next_version FROM retired_names WHERE name = ?1), 1))");
      ins.bind(1, name);
      ins.bind(2, req.workspace_id);
      ins.bind(3, now_iso);
      if (auto r = ins.run("insert artifact"); !r) return std::unexpected(r.error());
      row = row_locked(name);
      if (!row || !*row) return std::unexpected(db_.error("insert artifact"));
    } else if ((*row)->workspace_id != req.workspace_id) {
      return fail(Errc::conflict, fmt::format("artifact {} belongs to another workspace; pass another name", name));
    }
    Row& r = **row;
    // Publishing again is asking for the artifact to be seen: an expiry that has already passed
    // goes (one still ahead stays, unless the call sets another).
    if (!req.expires_in_s && r.expires_at && *r.expires_at <= now()) change.expires_in_s = 0;
    PublishResult out;
    if (auto a = apply_share_locked(r, change, out.new_invites); !a) return std::unexpected(a.error());
    const int number = int(r.next_version);
    {
      db::Statement v(db_,
                      "INSERT INTO versions(artifact, number, created_at, source_path, single_file, files, bytes, "
                      "trace_id, app) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)");
      v.bind(1, name);
      v.bind(2, number);
      v.bind(3, now_iso);
      v.bind(4, rel->empty() ? std::string(".") : *rel);
      v.bind(5, !*folder);
      v.bind(6, std::uint64_t(staged->files.size()));
      v.bind(7, staged->bytes);
      v.bind(8, req.trace_id);
      if (req.app) v.bind(9, req.app->dump());
      else v.bind_null(9);
      if (auto r = v.run("insert version"); !r) return std::unexpected(r.error());
    }
    db::Statement f(db_, "INSERT INTO files(artifact, version, path, sha256, size) VALUES (?1, ?2, ?3, ?4, ?5)");
    for (const auto& file : staged->files) {
      f.reset();
      f.bind(1, name);
      f.bind(2, number);
      f.bind(3, file.path);
      f.bind(4, file.sha256);
      f.bind(5, file.size);
      if (auto r = f.run("insert file"); !r) return std::unexpected(r.error());
    }
    {
      db::Statement u(db_, "UPDATE artifacts SET next_version = ?2 WHERE name = ?1");
      u.bind(1, name);
      u.bind(2, number + 1);
      if (auto r = u.run("update artifact"); !r) return std::unexpected(r.error());
    }
    if (auto c = tx.commit(); !c) return std::unexpected(c.error());
    r.next_version = number + 1;
    auto info = info_locked(r);
    if (!info) return std::unexpected(info.error());
    out.artifact = std::move(*info);
    out.version = out.artifact.versions.empty() ? VersionInfo{} : out.artifact.versions.back();
    for (const auto& v : out.artifact.versions)
      if (v.number == number) out.version = v;
    out.new_blobs = staged->new_blobs;
    out.skipped_symlinks = staged->skipped_symlinks;
    out.skipped_other = staged->skipped_other;
    return out;
  }
}

}  // namespace kiln::artifacts
