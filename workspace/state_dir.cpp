// secure_state_dir: create, check the owner, narrow the mode (see state_dir.h for why).
#include "workspace/state_dir.h"

#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

namespace kiln::workspace {

Result<std::string> secure_state_dir(const std::string& dir, bool create) {
  if (dir.empty()) return fail(Errc::invalid_argument, "the state directory is empty; set KILN_HOME");
  struct stat missing {};
  if (!create && ::lstat(dir.c_str(), &missing) != 0 && errno == ENOENT) return dir;
  std::error_code ec;
  std::filesystem::path p(dir);
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path(), ec);
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return fail(Errc::io, fmt::format("cannot create state directory {}: {}; set KILN_HOME to a writable folder", dir,
                                      std::strerror(errno)));
  }
  char real[PATH_MAX];
  if (!::realpath(dir.c_str(), real)) {
    return fail(Errc::io, fmt::format("state directory {}: {}", dir, std::strerror(errno)));
  }
  // Checked and fixed through one descriptor, so a rename between the check and the chmod
  // cannot point either at another directory.
  int fd = ::open(real, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return fail(Errc::io, fmt::format("state directory {}: {}", real, std::strerror(errno)));
  struct stat st {};
  int rc = ::fstat(fd, &st);
  if (rc != 0 || !S_ISDIR(st.st_mode)) {
    ::close(fd);
    return fail(Errc::io, fmt::format("state directory {} is not a directory", real));
  }
  if (st.st_uid != ::geteuid()) {
    ::close(fd);
    return fail(Errc::io,
                fmt::format("state directory {} belongs to uid {}, not to this user (uid {}): its owner could change "
                            "the tokens, secrets and records Kiln keeps there. Use a directory of your own (set "
                            "KILN_HOME or --state-dir)",
                            real, st.st_uid, ::geteuid()));
  }
  if ((st.st_mode & 077) != 0 && ::fchmod(fd, 0700) != 0) {
    int err = errno;
    ::close(fd);
    return fail(Errc::io, fmt::format("state directory {} is open to other users (mode {:o}) and cannot be narrowed: {}",
                                      real, st.st_mode & 0777, std::strerror(err)));
  }
  ::close(fd);
  return std::string(real);
}

}  // namespace kiln::workspace
