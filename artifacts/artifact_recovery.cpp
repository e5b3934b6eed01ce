// Crash and full-disk leftovers of the blob store: temp copies of a publish killed mid-copy
// (blobs/tmp), blobs an unpublish killed before its commit had moved to blobs/trash, and the new
// blobs of a copy that failed half-way (a full disk), which nothing references.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "artifacts/artifact_internal.h"
#include "core/owner_tag.h"

namespace kiln::artifacts {

namespace {

std::vector<std::string> names_in(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (auto* e = ::readdir(d))
      if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) out.emplace_back(e->d_name);
    ::closedir(d);
  }
  return out;
}

}  // namespace

namespace detail {

std::string write_failure(const std::string& dir, int err) {
  if (err == ENOSPC || err == EDQUOT) {
    return fmt::format("the state directory {} is full ({}): nothing was published; free space there (unpublish "
                       "old versions, delete other files on that disk) or set KILN_HOME to a folder on a larger "
                       "disk, then publish again",
                       dir, std::strerror(err));
  }
  return fmt::format("cannot write to {}: {}", dir, std::strerror(err));
}

}  // namespace detail

void ArtifactStore::reclaim_leftovers() {
  // Temp copies: a dead writer's at once; untagged ones (older servers) once an hour old.
  blobs_.reclaim_temp();
  // Trash: an unpublish moves unreferenced blobs there under the write lock and deletes them
  // after its commit. Killed before the commit, its version still stands: the blob goes back.
  const std::string trash = dir_ + "/blobs/trash";
  auto names = names_in(trash);
  if (names.empty()) return;
  std::lock_guard lock(mu_);
  db::Transaction tx(db_);
  if (!tx.begin()) return;
  db::Statement ref(db_, "SELECT 1 FROM files WHERE sha256 = ?1 LIMIT 1");
  for (const auto& n : names) {
    const std::string p = trash + "/" + n;
    const std::string sha = n.substr(0, n.find('.'));
    ref.reset();
    ref.bind(1, sha);
    auto used = ref.next("select files");
    if (!used) return;  // unsure: leave everything as it is
    struct stat st {};
    if (*used && detail::valid_sha256_hex(sha) && ::stat(blob_path(sha).c_str(), &st) != 0) {
      ::mkdir(fmt::format("{}/blobs/sha256/{}", dir_, sha.substr(0, 2)).c_str(), 0700);
      ::rename(p.c_str(), blob_path(sha).c_str());
    } else {
      ::unlink(p.c_str());
    }
  }
  (void)tx.commit();
}

void ArtifactStore::drop_unreferenced(const std::vector<std::string>& sha256s) {
  if (sha256s.empty()) return;
  // Under both locks, like unpublish: nobody relying on one of these blobs is between its copy and
  // its commit, and a publish that deduplicated against one checks at commit that it still exists.
  auto hold = blobs_.lock_exclusive();
  if (!hold) return;
  std::lock_guard lock(mu_);
  db::Transaction tx(db_);
  if (!tx.begin()) return;
  db::Statement ref(db_, "SELECT 1 FROM files WHERE sha256 = ?1 LIMIT 1");
  for (const auto& sha : sha256s) {
    ref.reset();
    ref.bind(1, sha);
    auto used = ref.next("select files");
    if (!used) break;
    if (!*used && detail::valid_sha256_hex(sha) && !held_elsewhere(sha)) blobs_.remove(sha);
  }
  (void)tx.commit();
}

}  // namespace kiln::artifacts
