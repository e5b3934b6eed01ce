// inotify for checkpoint_watch.h: one descriptor per workspace, one watch per folder.
#include "workspace/checkpoint_watch.h"

#include <sys/inotify.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <string_view>

#include <fmt/format.h>

namespace kiln::workspace {

namespace {

constexpr std::uint32_t kMask = IN_CREATE | IN_DELETE | IN_MODIFY | IN_ATTRIB | IN_MOVED_FROM | IN_MOVED_TO |
                                IN_CLOSE_WRITE | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR |
                                IN_EXCL_UNLINK;

bool ignore_file(std::string_view name) { return name == ".gitignore" || name == ".ignore"; }

constexpr std::size_t kMaxWatchesShare = 4;  // a quarter of the user's pool

std::atomic<std::size_t> g_watches{0};  // held by every WorkspaceWatch of this process

}  // namespace

std::size_t WorkspaceWatch::budget() {
  static const std::size_t pool = [] {
    std::size_t n = 8192;  // the kernel's smallest default
    if (std::FILE* f = std::fopen("/proc/sys/fs/inotify/max_user_watches", "re")) {
      unsigned long v = 0;
      if (std::fscanf(f, "%lu", &v) == 1 && v > 0) n = v;
      std::fclose(f);
    }
    return n;
  }();
  return pool / kMaxWatchesShare;
}

void WorkspaceWatch::give_up() {
  if (gave_up_) return;
  gave_up_ = true;
  ::close(fd_);
  fd_ = -1;
  g_watches.fetch_sub(dirs_.size());
  dirs_.clear();
}

std::unique_ptr<WorkspaceWatch> WorkspaceWatch::start(const std::string&) {
  int fd = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (fd < 0) return nullptr;
  return std::unique_ptr<WorkspaceWatch>(new WorkspaceWatch(fd));
}

WorkspaceWatch::~WorkspaceWatch() {
  std::lock_guard lock(mu_);
  give_up();
}

void WorkspaceWatch::add(const std::string& rel, int dir_fd) {
  std::lock_guard lock(mu_);
  if (gave_up_) return;
  if (g_watches.load() >= budget()) return give_up();
  std::string via = fmt::format("/proc/self/fd/{}", dir_fd);
  int wd = ::inotify_add_watch(fd_, via.c_str(), kMask);
  if (wd < 0) {
    lost_ = true;
    return;
  }
  if (dirs_.emplace(wd, rel).second) g_watches.fetch_add(1);
  else dirs_[wd] = rel;  // a folder met again (a rescan) keeps its one watch
}

WorkspaceWatch::Dirty WorkspaceWatch::drain() {
  Dirty d;
  alignas(inotify_event) char buf[64 * 1024];
  std::lock_guard lock(mu_);
  if (gave_up_) {
    d.all = true;
    return d;
  }
  for (;;) {
    ssize_t n = ::read(fd_, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN) d.all = true;
      break;
    }
    if (n == 0) break;
    for (char* p = buf; p < buf + n;) {
      auto* e = reinterpret_cast<inotify_event*>(p);
      p += sizeof(inotify_event) + e->len;
      if (e->mask & IN_Q_OVERFLOW) {
        d.all = true;
        continue;
      }
      auto it = dirs_.find(e->wd);
      if (e->mask & IN_IGNORED) {
        if (it != dirs_.end()) {
          dirs_.erase(it);
          g_watches.fetch_sub(1);
        }
        continue;
      }
      if (it == dirs_.end()) continue;
      // A folder that moved keeps its watch under its old name: nothing can vouch for paths now.
      if (e->mask & IN_MOVE_SELF) d.all = true;
      if (e->mask & IN_DELETE_SELF) continue;  // its parent reports it gone
      if (e->len > 0 && ignore_file(e->name)) d.all = true;
      d.dirs.insert(it->second);
    }
  }
  if (lost_) {
    d.all = true;
    lost_ = false;
  }
  return d;
}

}  // namespace kiln::workspace
