// Fd plumbing for the helper. close_fds_except is used in forked children, so it avoids allocation
// and falls back to a plain loop where close_range(2) is missing (kernels before 5.9).
#include "sandbox/helper/fd_util.h"

#include <algorithm>
#include <cerrno>
#include <fcntl.h>
#include <linux/close_range.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace kiln::helper {

static void close_range_compat(unsigned lo, unsigned hi) {
  if (lo > hi) return;
  if (::syscall(SYS_close_range, lo, hi, 0) == 0) return;
  struct rlimit rl {};
  unsigned max = 65536;
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < max)
    max = static_cast<unsigned>(rl.rlim_cur);
  for (unsigned fd = lo; fd <= hi && fd < max; ++fd) ::close(static_cast<int>(fd));
}

void close_fds_except(const int* keep, int n) {
  int sorted[8];
  int m = 0;
  for (int i = 0; i < n && m < 8; ++i)
    if (keep[i] >= 3) sorted[m++] = keep[i];
  std::sort(sorted, sorted + m);
  unsigned lo = 3;
  for (int i = 0; i < m; ++i) {
    unsigned k = static_cast<unsigned>(sorted[i]);
    if (k > lo) close_range_compat(lo, k - 1);
    lo = std::max(lo, k + 1);
  }
  close_range_compat(lo, ~0U);
}

bool write_file(const char* path, const char* data) {
  int fd = ::open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  std::size_t len = 0;
  while (data[len] != '\0') ++len;
  bool ok = write_all(fd, data, len);
  int saved = errno;
  ::close(fd);
  errno = saved;
  return ok;
}

bool set_cloexec(int fd, bool on) {
  int flags = ::fcntl(fd, F_GETFD);
  if (flags < 0) return false;
  flags = on ? (flags | FD_CLOEXEC) : (flags & ~FD_CLOEXEC);
  return ::fcntl(fd, F_SETFD, flags) == 0;
}

}  // namespace kiln::helper
