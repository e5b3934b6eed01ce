// Confined path resolution for every file tool: lexical checks first (for clear messages), then
// the kernel (openat2 RESOLVE_BENEATH) or an O_NOFOLLOW walk decides what a path really reaches.
#include "workspace/root.h"

#include "core/open_dir.h"

#include "core/quote.h"

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fmt/format.h>
#include <vector>

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace kiln::workspace {

namespace {

std::atomic<bool> g_force_walk{false};
std::atomic<bool> g_no_openat2{false};  // set once the kernel (or a seccomp filter) says ENOSYS

constexpr int kMaxSymlinks = 40;  // the kernel's own limit (MAXSYMLINKS)

std::vector<std::string_view> split(std::string_view p) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i <= p.size()) {
    size_t j = p.find('/', i);
    if (j == std::string_view::npos) j = p.size();
    if (j > i) out.push_back(p.substr(i, j - i));
    i = j + 1;
  }
  return out;
}

// Folds "." and ".." lexically. Returns false when ".." climbs above the start.
bool normalise(std::string_view p, std::vector<std::string_view>& parts) {
  for (auto c : split(p)) {
    if (c == ".") continue;
    if (c == "..") {
      if (parts.empty()) return false;
      parts.pop_back();
      continue;
    }
    parts.push_back(c);
  }
  return true;
}

std::string join(const std::vector<std::string_view>& parts, size_t from = 0) {
  std::string out;
  for (size_t i = from; i < parts.size(); ++i) {
    if (!out.empty()) out += '/';
    out += parts[i];
  }
  return out;
}

std::string quoted(std::string_view p) { return fmt::format("'{}'", bounded(p)); }

// openat2 with the confinement flags. Returns an fd or -errno.
int openat2_beneath(int dirfd, const char* path, int flags, mode_t mode) {
  open_how how{};
  how.flags = static_cast<unsigned long long>(flags | O_CLOEXEC);
  how.mode = (flags & (O_CREAT | O_TMPFILE)) ? mode : 0;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
  for (int attempt = 0; attempt < 8; ++attempt) {
    long r = ::syscall(SYS_openat2, dirfd, path, &how, sizeof how);
    if (r >= 0) return static_cast<int>(r);
    // EAGAIN: a concurrent rename or mount made the kernel unsure the walk stayed beneath.
    if (errno != EAGAIN && errno != EINTR) return -errno;
  }
  return -EAGAIN;
}

// The per-component walk for kernels without openat2: every step is an openat with O_NOFOLLOW, and
// symlinks are read and spliced in by hand, so a link swapped in mid-walk fails the walk instead of
// redirecting it. ".." pops the stack of directories we came through and never passes the root.
int walk_beneath(int root_fd, std::string_view rel, int flags, mode_t mode) {
  std::vector<UniqueFd> stack;
  int r = ::openat(root_fd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (r < 0) return -errno;
  stack.emplace_back(r);
  std::deque<std::string> todo;
  for (auto c : split(rel)) todo.emplace_back(c);
  if (todo.empty()) todo.emplace_back(".");
  int links = 0;
  int retries = 0;
  while (!todo.empty()) {
    std::string comp = std::move(todo.front());
    todo.pop_front();
    int cur = stack.back().get();
    bool last = todo.empty();
    if (comp == "." && !last) continue;
    if (comp == "..") {
      if (stack.size() == 1) return -EXDEV;
      stack.pop_back();
      if (last) todo.emplace_back(".");
      continue;
    }
    struct stat st{};
    bool exists = true;
    if (comp != ".") {
      if (::fstatat(cur, comp.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
        if (errno != ENOENT || !last) return -errno;
        exists = false;
      }
    }
    bool follow = !last || !(flags & O_NOFOLLOW);
    if (exists && comp != "." && S_ISLNK(st.st_mode) && follow) {
      if (++links > kMaxSymlinks) return -ELOOP;
      char buf[PATH_MAX];
      ssize_t n = ::readlinkat(cur, comp.c_str(), buf, sizeof buf);
      if (n < 0) return -errno;
      std::string_view target(buf, static_cast<size_t>(n));
      if (target.empty()) return -ENOENT;
      if (target.front() == '/') return -EXDEV;  // as RESOLVE_BENEATH: absolute links never resolve
      auto parts = split(target);
      for (auto it = parts.rbegin(); it != parts.rend(); ++it) todo.emplace_front(*it);
      if (parts.empty()) todo.emplace_front(".");
      continue;
    }
    if (!last) {
      int fd = ::openat(cur, comp.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (fd < 0) return -errno;
      stack.emplace_back(fd);
      continue;
    }
    int extra = (comp == ".") ? 0 : O_NOFOLLOW;
    int fd = ::openat(cur, comp.c_str(), flags | extra | O_CLOEXEC, mode);
    if (fd >= 0) return fd;
    // A symlink appeared between fstatat and openat: look again (bounded) rather than follow it.
    if (errno == ELOOP && follow && !(flags & O_NOFOLLOW) && ++retries < 8) {
      todo.emplace_back(std::move(comp));
      continue;
    }
    return -errno;
  }
  return -ENOENT;
}

int open_beneath(int root_fd, const std::string& rel, int flags, mode_t mode) {
  const char* p = rel.empty() ? "." : rel.c_str();
  if (!g_force_walk.load() && !g_no_openat2.load()) {
    int r = openat2_beneath(root_fd, p, flags, mode);
    if (r != -ENOSYS) return r;
    g_no_openat2.store(true);
  }
  return walk_beneath(root_fd, rel, flags, mode);
}

Error open_error(int err, std::string_view client, const std::string& root_path, int flags) {
  std::string p = quoted(client);
  switch (err) {
    case EXDEV:
      return {Errc::path_escape,
              fmt::format("path {} resolves outside the workspace root {} (through a symbolic link that points "
                          "out, or an absolute link); only paths inside the workspace can be used",
                          p, root_path)};
    case ELOOP:
      if (flags & O_NOFOLLOW)
        return {Errc::invalid_argument, fmt::format("path {} is a symbolic link, which this operation does not follow", p)};
      return {Errc::path_escape,
              fmt::format("path {} goes through a /proc magic link or too many symbolic links; it cannot be "
                          "used inside the workspace root {}",
                          p, root_path)};
    case ENOENT:
      return {Errc::not_found, fmt::format("{} does not exist in the workspace", p)};
    case ENOTDIR:
      return {Errc::not_found, fmt::format("{} does not exist: one of its parent components is not a folder", p)};
    case EISDIR:
      return {Errc::invalid_argument, fmt::format("{} is a folder, not a file", p)};
    case EEXIST:
      return {Errc::conflict, fmt::format("{} already exists", p)};
    case ENAMETOOLONG:
      return {Errc::invalid_argument, fmt::format("path {} is too long", p)};
    case EACCES:
    case EPERM:
      return {Errc::io, fmt::format("permission denied opening {}", p)};
    default:
      return {Errc::io, fmt::format("cannot open {}: {}", p, std::strerror(err))};
  }
}

bool inside(std::string_view abs, std::string_view base, std::string_view& rest) {
  if (base.empty()) return false;
  if (base == "/") {
    rest = abs;
    return true;
  }
  if (abs.substr(0, base.size()) != base) return false;
  if (abs.size() == base.size()) {
    rest = {};
    return true;
  }
  if (abs[base.size()] != '/') return false;
  rest = abs.substr(base.size() + 1);
  return true;
}

}  // namespace

void Root::force_component_walk(bool on) { g_force_walk.store(on); }

Result<Root> Root::open_resolved(const std::string& path) {
  if (path.empty() || path.front() != '/')
    return fail(Errc::invalid_argument, fmt::format("workspace path '{}' is not absolute", bounded(path)));
  int fd = open_dir_no_symlinks(path.c_str());
  if (fd < 0) {
    int err = errno;
    if (err == ELOOP)
      return fail(Errc::invalid_argument,
                  fmt::format("the folder '{}' has a symbolic link in its path now (it was replaced after kiln "
                              "resolved it); open it again by its real path",
                              bounded(path)));
    if (err == ENOENT || err == ENOTDIR)
      return fail(Errc::not_found, fmt::format("folder '{}' does not exist", bounded(path)));
    return fail(Errc::io, fmt::format("cannot open folder '{}': {}", bounded(path), std::strerror(err)));
  }
  Root root;
  root.path_ = path;
  while (root.path_.size() > 1 && root.path_.back() == '/') root.path_.pop_back();
  root.dir_ = UniqueFd(fd);
  return root;
}

Result<Root> Root::open(const std::string& path) {
  if (path.empty()) return fail(Errc::invalid_argument, "workspace path is empty; pass an absolute folder path");
  char* canon = ::realpath(path.c_str(), nullptr);
  if (!canon) {
    int err = errno;
    if (err == ENOENT || err == ENOTDIR)
      return fail(Errc::not_found, fmt::format("folder '{}' does not exist", bounded(path)));
    return fail(Errc::io, fmt::format("cannot resolve '{}': {}", bounded(path), std::strerror(err)));
  }
  Root root;
  root.path_ = canon;
  std::free(canon);
  int fd = ::open(root.path_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    if (err == ENOTDIR) return fail(Errc::invalid_argument, fmt::format("'{}' is not a folder", bounded(path)));
    return fail(Errc::io, fmt::format("cannot open folder '{}': {}", bounded(path), std::strerror(err)));
  }
  root.dir_ = UniqueFd(fd);
  // Remember the caller's own spelling (lexically cleaned) so absolute paths written with it are
  // accepted too; resolution still happens beneath the descriptor, so this widens nothing.
  if (path.front() == '/') {
    std::vector<std::string_view> parts;
    if (normalise(path, parts)) {
      std::string alias = "/" + join(parts);
      if (alias != root.path_) root.alias_ = std::move(alias);
    }
  }
  return root;
}

Result<std::string> Root::relative(std::string_view client_path) const {
  // Every file tool passes through here first, so the messages after it quote at most this much.
  if (client_path.size() > PATH_MAX) {
    return fail(Errc::invalid_argument,
                fmt::format("path '{}' is longer than the {} bytes a path can have; pass a shorter one",
                            bounded(client_path), PATH_MAX));
  }
  if (client_path.empty())
    return fail(Errc::invalid_argument, "path is empty; pass a path relative to the workspace root (\".\" is the root)");
  if (client_path.find('\0') != std::string_view::npos)
    return fail(Errc::invalid_argument, "path contains a NUL byte; pass a plain relative path");
  if (client_path.find_first_of("\n\r") != std::string_view::npos)
    return fail(Errc::invalid_argument,
                fmt::format("path '{}' contains a line break; pass a plain relative path", bounded(client_path)));
  std::string_view rel = client_path;
  std::vector<std::string_view> parts;
  if (client_path.front() == '/') {
    normalise(client_path, parts);  // ".." at "/" stays at "/", as the kernel does
    std::string abs = "/" + join(parts);
    std::string_view rest;
    if (!inside(abs, path_, rest) && !inside(abs, alias_, rest)) {
      return fail(Errc::path_escape,
                  fmt::format("path '{}' is outside the workspace root {}; use a path relative to the root",
                              bounded(client_path), path_));
    }
    return std::string(rest);
  }
  if (!normalise(rel, parts)) {
    return fail(Errc::path_escape,
                fmt::format("path '{}' is outside the workspace root {}; use a path relative to the root",
                            bounded(client_path), path_));
  }
  return join(parts);
}

Result<UniqueFd> Root::open(std::string_view client_path, int flags, mode_t mode) const {
  auto rel = relative(client_path);
  if (!rel) return std::unexpected(rel.error());
  int fd = open_beneath(dir_.get(), *rel, flags, mode);
  if (fd < 0) return std::unexpected(open_error(-fd, client_path, path_, flags));
  return UniqueFd(fd);
}

Result<Root::Parent> Root::open_parent(std::string_view client_path, bool create_dirs) const {
  auto rel = relative(client_path);
  if (!rel) return std::unexpected(rel.error());
  if (rel->empty()) {
    return fail(Errc::invalid_argument,
                fmt::format("path '{}' is the workspace root itself; name a file or folder inside it", client_path));
  }
  size_t slash = rel->rfind('/');
  std::string parent = slash == std::string::npos ? std::string() : rel->substr(0, slash);
  Parent out;
  out.name = slash == std::string::npos ? *rel : rel->substr(slash + 1);
  out.rel = *rel;
  constexpr int kDirFlags = O_RDONLY | O_DIRECTORY;
  int fd = open_beneath(dir_.get(), parent, kDirFlags, 0);
  if (fd < 0 && -fd == ENOENT && create_dirs) {
    // One level at a time, each mkdirat inside a directory already resolved beneath the root, so
    // a symlink planted mid-way can at most make the next open fail, never create outside.
    int cur = open_beneath(dir_.get(), "", kDirFlags, 0);
    if (cur < 0) return std::unexpected(open_error(-cur, ".", path_, kDirFlags));
    UniqueFd cur_fd(cur);
    std::string prefix;
    for (auto comp : split(parent)) {
      if (!prefix.empty()) prefix += '/';
      prefix += comp;
      int next = open_beneath(dir_.get(), prefix, kDirFlags, 0);
      if (next == -ENOENT) {
        if (::mkdirat(cur_fd.get(), std::string(comp).c_str(), 0755) != 0 && errno != EEXIST) {
          int err = errno;
          return fail(Errc::io, fmt::format("cannot create folder '{}': {}", prefix, std::strerror(err)));
        }
        next = open_beneath(dir_.get(), prefix, kDirFlags, 0);
      }
      if (next < 0) return std::unexpected(open_error(-next, prefix, path_, kDirFlags));
      cur_fd = UniqueFd(next);
    }
    fd = cur_fd.release();
  }
  if (fd < 0) {
    int err = -fd;
    if (err == ENOENT) {
      return fail(Errc::not_found,
                  fmt::format("folder '{}' (the parent of '{}') does not exist", parent, client_path));
    }
    if (err == ENOTDIR) {
      return fail(Errc::not_found,
                  fmt::format("'{}' cannot be used: a component of '{}' is not a folder", client_path, parent));
    }
    return std::unexpected(open_error(err, client_path, path_, kDirFlags));
  }
  out.dir = UniqueFd(fd);
  return out;
}

Result<std::string> Root::resolve(std::string_view client_path) const {
  auto fd = open(client_path, O_PATH);
  if (!fd) return std::unexpected(fd.error());
  char buf[PATH_MAX];
  std::string link = fmt::format("/proc/self/fd/{}", fd->get());
  ssize_t n = ::readlink(link.c_str(), buf, sizeof buf);
  if (n < 0) {
    int err = errno;
    return fail(Errc::unsupported, fmt::format("cannot tell where '{}' leads (/proc is needed): {}", client_path,
                                               std::strerror(err)));
  }
  std::string_view abs(buf, static_cast<size_t>(n));
  std::string_view rest;
  if (!inside(abs, path_, rest)) {
    return fail(Errc::path_escape,
                fmt::format("path '{}' resolves outside the workspace root {}", client_path, path_));
  }
  return std::string(rest);
}

}  // namespace kiln::workspace
