// Joining a cgroup from the process that moves, without the kernel's global threadgroup lock.
// Writing to cgroup.procs takes cgroup_threadgroup_rwsem for writing, which waits for an RCU grace
// period: 8-15 ms on an idle machine, and every concurrent sandbox start queues behind it. Since
// Linux 5.19 ("cgroup: Optimize single thread migration") a thread that writes "0" to a v1
// hierarchy's `tasks` file moves only itself and skips that lock; for a single-threaded process (a
// child just forked, the helper before it spawns anything) that moves the whole process. v2 has no
// `tasks` file: there the move falls back to cgroup.procs. No allocation: usable between fork and exec.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "core/fd_io.h"

namespace kiln {

// Moves the calling thread, which must be its process's only thread, into the cgroup whose folder
// `dir_fd` names (O_PATH or O_DIRECTORY). False with errno on failure.
inline bool join_cgroup_single_threaded(int dir_fd) {
  int fd = ::openat(dir_fd, "tasks", O_WRONLY | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT) fd = ::openat(dir_fd, "cgroup.procs", O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = write_all(fd, "0", 1);
  int saved = errno;
  ::close(fd);
  errno = saved;
  return ok;
}

// The same for a folder given by path.
inline bool join_cgroup_single_threaded(const char* dir) {
  int dir_fd = ::open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) return false;
  bool ok = join_cgroup_single_threaded(dir_fd);
  int saved = errno;
  ::close(dir_fd);
  errno = saved;
  return ok;
}

}  // namespace kiln
