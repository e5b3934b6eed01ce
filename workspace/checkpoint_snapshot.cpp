// The files now as a flat tree, hashed but stored nowhere (checkpoint_internal.h snapshot_now).
#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <thread>

#include "workspace/checkpoint_internal.h"

namespace kiln::workspace {

Result<FlatTree> snapshot_now(CheckpointStore::Impl& im, const Root& root, const std::string& workspace_id,
                              std::stop_token stop) {
  auto scanned = scan_workspace(root, stop);
  if (!scanned) return std::unexpected(scanned.error());
  auto& nodes = scanned->nodes;
  std::vector<std::size_t> misses;
  {
    std::lock_guard lock(im.mu);
    auto cache = im.cache_locked(workspace_id);
    if (!cache) return std::unexpected(cache.error());
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      ScanNode& n = nodes[i];
      if (n.entry.type == EntryType::symlink) {
        n.entry.sha = blobs::sha256_hex(n.link_target);
        continue;
      }
      if (n.entry.type != EntryType::file) continue;
      auto it = (*cache)->entries.find(n.entry.path);
      if (it != (*cache)->entries.end() && it->second.ino == n.ino && it->second.size == n.entry.size &&
          it->second.mtime_ns == n.mtime_ns && it->second.ctime_ns == n.ctime_ns &&
          n.mtime_ns < it->second.hashed_at_ns - kRacyNs) {
        n.entry.sha = it->second.sha;
        continue;
      }
      misses.push_back(i);
    }
  }
  std::atomic<std::size_t> next{0};
  std::vector<char> gone(nodes.size(), 0);
  auto worker = [&] {
    for (std::size_t k; (k = next++) < misses.size() && !stop.stop_requested();) {
      ScanNode& n = nodes[misses[k]];
      auto fd = root.open(n.entry.path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
      struct stat st {};
      if (!fd || ::fstat(fd->get(), &st) != 0 || !S_ISREG(st.st_mode)) {
        gone[misses[k]] = 1;
        continue;
      }
      auto h = blobs::BlobStore::hash(fd->get(), n.entry.path);
      if (!h) {
        gone[misses[k]] = 1;
        continue;
      }
      n.entry.sha = h->sha256;
      n.entry.size = h->size;
      n.entry.mode = std::uint32_t(st.st_mode & 07777);
    }
  };
  {
    unsigned threads = std::max(1u, std::min<unsigned>(std::thread::hardware_concurrency(), unsigned(misses.size() / 8 + 1)));
    std::vector<std::jthread> pool;
    for (unsigned t = 1; t < threads; ++t) pool.emplace_back(worker);
    worker();
  }
  if (stop.stop_requested()) return fail(Errc::cancelled, "cancelled");
  FlatTree flat;
  flat.reserve(nodes.size());
  for (std::size_t i = 0; i < nodes.size(); ++i)
    if (!gone[i]) flat.push_back(std::move(nodes[i].entry));
  return flat;
}

}  // namespace kiln::workspace
