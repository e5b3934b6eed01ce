// inotify for checkpoint_watch.h: one descriptor per workspace, one watch per folder.
#include "workspace/checkpoint_watch.h"

#include <sys/inotify.h>
#include <unistd.h>

#include <cerrno>
#include <string_view>

#include <fmt/format.h>

namespace kiln::workspace {

namespace {

constexpr std::uint32_t kMask = IN_CREATE | IN_DELETE | IN_MODIFY | IN_ATTRIB | IN_MOVED_FROM | IN_MOVED_TO |
                                IN_CLOSE_WRITE | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR |
                                IN_EXCL_UNLINK;

bool ignore_file(std::string_view name) { return name == ".gitignore" || name == ".ignore"; }

}  // namespace

std::unique_ptr<WorkspaceWatch> WorkspaceWatch::start(const std::string&) {
  int fd = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (fd < 0) return nullptr;
  return std::unique_ptr<WorkspaceWatch>(new WorkspaceWatch(fd));
}

WorkspaceWatch::~WorkspaceWatch() { ::close(fd_); }

void WorkspaceWatch::add(const std::string& rel, int dir_fd) {
  std::string via = fmt::format("/proc/self/fd/{}", dir_fd);
  int wd = ::inotify_add_watch(fd_, via.c_str(), kMask);
  std::lock_guard lock(mu_);
  if (wd < 0) {
    lost_ = true;
    return;
  }
  dirs_[wd] = rel;
}

WorkspaceWatch::Dirty WorkspaceWatch::drain() {
  Dirty d;
  alignas(inotify_event) char buf[64 * 1024];
  std::lock_guard lock(mu_);
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
        if (it != dirs_.end()) dirs_.erase(it);
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
