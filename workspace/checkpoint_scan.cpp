// The checkpoint walk: the shared parallel walker (ignore rules, .git left out, no symlink
// followed) with an fstatat per entry from the folder's own descriptor.
#include "workspace/checkpoint_scan.h"

#include "workspace/checkpoint_watch.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>

#include <fmt/format.h>

namespace kiln::workspace {

namespace {

const char* kind_of(mode_t m) {
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISSOCK(m)) return "a socket";
  if (S_ISCHR(m) || S_ISBLK(m)) return "a device";
  return "not a file, folder or link";
}

}  // namespace

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

Error too_many_entries(std::size_t cap) {
  return Error{Errc::too_large,
               fmt::format("the workspace holds more than {} files, folders and links that are not ignored, the most a "
                           "checkpoint covers; add generated folders (build output, dependencies) to .gitignore or "
                           ".ignore",
                           cap)};
}

Result<ScanResult> scan_workspace(const Root& root, std::stop_token stop, WorkspaceWatch* watch,
                                  const std::string& start, int max_depth, std::size_t max_entries) {
  // The walk stops as soon as the scan holds too many entries, before it holds them all.
  std::stop_source enough;
  std::stop_callback outer(stop, [&] { enough.request_stop(); });
  std::atomic<std::size_t> seen{0};
  WalkOptions o;
  o.start = start;
  o.max_depth = max_depth;
  if (max_depth == 1) o.threads = 1;  // one folder's own entries: nothing to share out
  if (watch) o.on_folder_open = [watch](const std::string& rel, int fd) { watch->add(rel, fd); };
  const unsigned threads = walk_thread_count(o);
  std::vector<std::vector<ScanNode>> per(threads);
  std::mutex skipped_mu;
  ScanResult out;
  auto skip = [&](std::string_view path, std::string why) {
    std::lock_guard lock(skipped_mu);
    if (out.skipped.size() < kMaxSkippedShown) out.skipped.push_back(fmt::format("{}: {}", path, why));
    ++out.skipped_count;
  };
  auto r = walk(root, o, enough.get_token(), [&](const WalkEntry& e, unsigned worker) {
    if (seen.fetch_add(1) >= max_entries) return (void)enough.request_stop();
    // A name with a line break is one no workspace path may hold (Root::relative refuses it, and
    // so would the reads below): noted and left alone, or one such file would fail every checkpoint
    // of the workspace, every run's changes and every restore with it.
    if (e.path.find_first_of("\n\r") != std::string_view::npos)
      return skip(e.path, "a name with a line break, not captured");
    struct stat st {};
    if (::fstatat(e.dir_fd, e.name.data(), &st, AT_SYMLINK_NOFOLLOW) != 0) return;  // gone since listed
    ScanNode n;
    n.entry.path = std::string(e.path);
    n.entry.mode = std::uint32_t(st.st_mode & 07777);
    n.ino = std::uint64_t(st.st_ino);
    n.nlink = std::uint64_t(st.st_nlink);
    n.mtime_ns = timespec_ns(st.st_mtim);
    n.ctime_ns = timespec_ns(st.st_ctim);
    if (S_ISREG(st.st_mode)) {
      n.entry.type = EntryType::file;
      n.entry.size = std::uint64_t(st.st_size);
    } else if (S_ISDIR(st.st_mode)) {
      n.entry.type = EntryType::dir;
    } else if (S_ISLNK(st.st_mode)) {
      n.entry.type = EntryType::symlink;
      std::string target(std::size_t(st.st_size > 0 ? st.st_size : 256) + 1, '\0');
      ssize_t len = ::readlinkat(e.dir_fd, e.name.data(), target.data(), target.size());
      if (len < 0 || std::size_t(len) >= target.size()) return skip(e.path, "a link that changed while read");
      target.resize(std::size_t(len));
      n.link_target = std::move(target);
      n.entry.size = n.link_target.size();
    } else {
      return skip(e.path, fmt::format("{}, not captured", kind_of(st.st_mode)));
    }
    per[worker].push_back(std::move(n));
  });
  if (seen.load() > max_entries && !stop.stop_requested()) return std::unexpected(too_many_entries(max_entries));
  if (!r) return std::unexpected(r.error());
  if (r->too_deep) {
    skip(r->first_too_deep, fmt::format("nested more than {} folders deep or a path longer than {} bytes, not captured "
                                        "(nor anything beneath it)",
                                        kMaxWalkDepth, kMaxWalkPath));
    out.skipped_count += r->too_deep - 1;
  }
  std::size_t total = 0;
  for (const auto& v : per) total += v.size();
  out.nodes.reserve(total);
  for (auto& v : per) std::move(v.begin(), v.end(), std::back_inserter(out.nodes));
  std::sort(out.nodes.begin(), out.nodes.end(),
            [](const ScanNode& a, const ScanNode& b) { return path_less(a.entry.path, b.entry.path); });
  return out;
}

}  // namespace kiln::workspace
