// One way to open a folder without following any symbolic link (openat2 RESOLVE_NO_SYMLINKS, or
// O_NOFOLLOW on the last component where the kernel lacks openat2), shared by the places that must
// open exactly the folder a check saw: workspace roots and the sandbox's workspace identity.
#pragma once

#include <cerrno>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace kiln {

// An O_PATH|O_DIRECTORY descriptor (the caller closes it), or -1 with errno (ELOOP: a link on the way).
inline int open_dir_no_symlinks(const char* path) {
  open_how how{};
  how.flags = O_PATH | O_DIRECTORY | O_CLOEXEC;
  how.resolve = RESOLVE_NO_SYMLINKS;
  long fd = ::syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof how);
  if (fd < 0 && errno == ENOSYS) fd = ::open(path, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  return static_cast<int>(fd);
}

}  // namespace kiln
