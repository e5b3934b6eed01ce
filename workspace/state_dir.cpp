// secure_state_dir: create, check the owner, narrow the mode (see state_dir.h for why).
#include "workspace/state_dir.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string_view>
#include <vector>

#include <fmt/format.h>

namespace kiln::workspace {

namespace {

// Whether another user could replace `st` (a folder above the state dir, or a symlink on the
// way): sshd's StrictModes rule. Root and we may own it; a folder writable by another group or
// by everyone is fine only when sticky (/tmp), where nobody can rename another's entries.
std::optional<std::string> foreign_control(const struct stat& st) {
  const uid_t me = ::geteuid();
  if (st.st_uid != 0 && st.st_uid != me) return fmt::format("belongs to uid {}", st.st_uid);
  if (S_ISLNK(st.st_mode)) return std::nullopt;
  bool group_w = (st.st_mode & S_IWGRP) && st.st_gid != ::getegid();
  bool other_w = st.st_mode & S_IWOTH;
  if ((group_w || other_w) && !(st.st_mode & S_ISVTX))
    return fmt::format("is writable by {} (mode {:o}) and not sticky", other_w ? "everyone" : "its group",
                       st.st_mode & 07777);
  return std::nullopt;
}

// Every existing folder above `dir`, by the name given (lstat: a symlink on the way is judged
// itself) and by its real path (the folders the name lands in).
Result<void> check_ancestors(const std::filesystem::path& dir) {
  auto refuse = [&](const std::string& where, const std::string& why) {
    return fail(Errc::io, fmt::format("state directory {}: {} {}, so another user could swap the directory (and the "
                                      "token, secrets and traces in it) for one of their choosing. Use a directory "
                                      "whose every parent only you or root can change (set KILN_HOME or --state-dir)",
                                      dir.string(), where, why));
  };
  std::vector<std::filesystem::path> names;
  for (auto p = dir.parent_path(); ; p = p.parent_path()) {
    names.push_back(p);
    if (p == p.parent_path()) break;
  }
  for (const auto& p : names) {
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0) continue;  // not made yet: create_directories makes it ours
    if (auto why = foreign_control(st)) return refuse(p.string(), *why);
    if (S_ISLNK(st.st_mode)) {
      char real[PATH_MAX];
      if (!::realpath(p.c_str(), real)) continue;
      for (std::filesystem::path q = real; ; q = q.parent_path()) {
        struct stat qs {};
        if (::lstat(q.c_str(), &qs) == 0)
          if (auto why = foreign_control(qs)) return refuse(q.string() + " (where " + p.string() + " leads)", *why);
        if (q == q.parent_path()) break;
      }
    }
  }
  return {};
}

// Whether the folder open at `dirfd` is Kiln's to narrow: empty (a folder made for Kiln), or
// already holding one of Kiln's databases or its token (an older Kiln made its state directory
// with the umask's mode; those are narrowed on upgrade). Anything else is someone else's folder.
bool is_kiln_state_folder(int dirfd) {
  static constexpr std::string_view kiln_marks[] = {"kiln.db", "traces.db", "artifacts.db", "mcp-token"};
  int fd = ::openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return false;
  DIR* d = ::fdopendir(fd);
  if (!d) {
    ::close(fd);
    return false;
  }
  bool empty = true, marked = false;
  while (auto* e = ::readdir(d)) {
    std::string_view name = e->d_name;
    if (name == "." || name == "..") continue;
    empty = false;
    for (auto m : kiln_marks) marked = marked || name == m;
  }
  ::closedir(d);
  return empty || marked;
}

}  // namespace

Result<std::string> secure_state_dir(const std::string& dir, bool create) {
  if (dir.empty()) return fail(Errc::invalid_argument, "the state directory is empty; set KILN_HOME");
  struct stat missing {};
  if (!create && ::lstat(dir.c_str(), &missing) != 0 && errno == ENOENT) return dir;
  std::error_code ec;
  std::filesystem::path p = std::filesystem::absolute(dir, ec).lexically_normal();
  if (ec) return fail(Errc::io, fmt::format("state directory {}: {}", dir, ec.message()));
  if (p.has_filename() == false && p.has_parent_path()) p = p.parent_path();  // a trailing slash
  // The folder itself must not be a symlink: whoever planted it chose where root writes the token.
  struct stat self {};
  if (::lstat(p.c_str(), &self) == 0 && S_ISLNK(self.st_mode)) {
    return fail(Errc::io, fmt::format("state directory {} is a symlink; Kiln keeps its token and secrets only in a "
                                      "real directory. Pass the directory it should use itself (KILN_HOME or "
                                      "--state-dir)",
                                      p.string()));
  }
  if (auto ok = check_ancestors(p); !ok) return std::unexpected(ok.error());
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
  // cannot point either at another directory. Opened by the name given, not following a final
  // symlink: one planted after the lstat above (it is never followed) is refused here.
  int fd = ::open(p.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0 && errno == ELOOP)
    return fail(Errc::io, fmt::format("state directory {} is a symlink; pass a real directory", p.string()));
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
  // Narrowing the mode is only right for Kiln's own folder: `--state-dir /etc` (or a project
  // folder) must not make someone else's files unreadable to everyone else.
  if ((st.st_mode & 077) != 0 && !is_kiln_state_folder(fd)) {
    ::close(fd);
    return fail(Errc::io, fmt::format("state directory {} is open to other users (mode {:o}) and is not empty and "
                                      "holds no Kiln state, so Kiln will not change its mode. Use an empty or new folder for "
                                      "Kiln's state (KILN_HOME or --state-dir), or make this one 0700 yourself",
                                      real, st.st_mode & 0777));
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
