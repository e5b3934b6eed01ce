// file_move and file_delete: entries are renamed or removed relative to parent directories opened
// beneath the root, by single names and without following symlinks, so a link swapped in between
// check and use can never redirect them outside the workspace.
#include <cerrno>
#include <cstdio>
#include <cstring>

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include "workspace/file_ops.h"
#include "workspace/file_ops_internal.h"

namespace kiln::workspace {

namespace {

// Removes everything inside the directory `name` of `parent`, then the directory itself.
// Symlinks are entries like any other: unlinked, never entered.
Result<void> remove_tree(int parent, const std::string& name, const std::string& rel, std::uint64_t& count, int depth) {
  if (depth > 512) return fail(Errc::too_large, fmt::format("'{}' is nested too deeply to delete", rel));
  int fd = ::openat(parent, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOTDIR || errno == ELOOP) {
      // Replaced by a file or a link since we looked: remove that entry itself.
      if (::unlinkat(parent, name.c_str(), 0) != 0) return std::unexpected(detail::errno_error(errno, "delete", rel));
      ++count;
      return {};
    }
    return std::unexpected(detail::errno_error(errno, "open", rel));
  }
  DIR* dir = ::fdopendir(fd);
  if (!dir) {
    int err = errno;
    ::close(fd);
    return std::unexpected(detail::errno_error(err, "list", rel));
  }
  std::vector<std::string> names;
  while (dirent* ent = ::readdir(dir)) {
    std::string_view n = ent->d_name;
    if (n != "." && n != "..") names.emplace_back(n);
  }
  Result<void> result;
  for (const auto& n : names) {
    std::string child = rel + "/" + n;
    struct stat st {};
    if (::fstatat(fd, n.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno == ENOENT) continue;
      result = std::unexpected(detail::errno_error(errno, "inspect", child));
      break;
    }
    if (S_ISDIR(st.st_mode)) {
      result = remove_tree(fd, n, child, count, depth + 1);
      if (!result) break;
    } else if (::unlinkat(fd, n.c_str(), 0) == 0) {
      ++count;
    } else if (errno != ENOENT) {
      result = std::unexpected(detail::errno_error(errno, "delete", child));
      break;
    }
  }
  ::closedir(dir);
  if (!result) return result;
  if (::unlinkat(parent, name.c_str(), AT_REMOVEDIR) != 0) return std::unexpected(detail::errno_error(errno, "delete", rel));
  ++count;
  return {};
}

std::uint64_t count_entries(int parent, const std::string& name) {
  int fd = ::openat(parent, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return 0;
  DIR* dir = ::fdopendir(fd);
  if (!dir) {
    ::close(fd);
    return 0;
  }
  std::uint64_t n = 0;
  while (dirent* ent = ::readdir(dir)) {
    std::string_view s = ent->d_name;
    if (s != "." && s != "..") ++n;
  }
  ::closedir(dir);
  return n;
}

}  // namespace

Result<MoveResult> move_path(const Root& root, const MoveRequest& req) {
  auto from_rel = root.relative(req.from);
  if (!from_rel) return std::unexpected(from_rel.error());
  auto to_rel = root.relative(req.to);
  if (!to_rel) return std::unexpected(to_rel.error());
  if (from_rel->empty()) return fail(Errc::invalid_argument, "the workspace root itself cannot be moved");
  if (to_rel->empty())
    return fail(Errc::invalid_argument, "`to` is the workspace root; name the new path inside it, e.g. \"dir/new_name\"");
  if (*from_rel == *to_rel) return fail(Errc::invalid_argument, fmt::format("from and to are the same path '{}'", *to_rel));
  if (to_rel->starts_with(*from_rel + "/")) {
    return fail(Errc::invalid_argument, fmt::format("cannot move '{}' into itself ('{}')", req.from, req.to));
  }
  auto from = root.open_parent(req.from);
  if (!from) return std::unexpected(from.error());
  struct stat st {};
  if (::fstatat(from->dir.get(), from->name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) return fail(Errc::not_found, fmt::format("'{}' does not exist; nothing was moved", req.from));
    return std::unexpected(detail::errno_error(errno, "inspect", req.from));
  }
  auto to = root.open_parent(req.to, true);
  if (!to) return std::unexpected(to.error());
  unsigned flags = req.overwrite ? 0 : RENAME_NOREPLACE;
  int rc = ::renameat2(from->dir.get(), from->name.c_str(), to->dir.get(), to->name.c_str(), flags);
  if (rc != 0 && errno == EINVAL && !req.overwrite) {
    // Some file systems lack RENAME_NOREPLACE; check then rename (a narrow race, but still beneath the root).
    struct stat tst {};
    if (::fstatat(to->dir.get(), to->name.c_str(), &tst, AT_SYMLINK_NOFOLLOW) == 0) errno = EEXIST;
    else rc = ::renameat(from->dir.get(), from->name.c_str(), to->dir.get(), to->name.c_str());
  }
  if (rc != 0) {
    int err = errno;
    switch (err) {
      case EEXIST:
        return fail(Errc::conflict,
                    fmt::format("'{}' already exists; pass overwrite: true to replace it", req.to));
      case ENOTEMPTY:
        return fail(Errc::conflict, fmt::format("'{}' is a folder that is not empty and cannot be replaced; delete it "
                                                "first with file_delete",
                                                req.to));
      case EISDIR:
        return fail(Errc::conflict, fmt::format("'{}' is a folder and '{}' is not; a file cannot replace a folder",
                                                req.to, req.from));
      case ENOTDIR:
        return fail(Errc::conflict, fmt::format("'{}' is not a folder but '{}' is; a folder cannot replace a file",
                                                req.to, req.from));
      case EXDEV:
        return fail(Errc::unsupported,
                    fmt::format("'{}' and '{}' are on different file systems; copy with file_read/file_write and "
                                "delete the original instead",
                                req.from, req.to));
      default:
        return std::unexpected(detail::errno_error(err, "move", req.from));
    }
  }
  ::fsync(to->dir.get());
  if (from->dir.get() != to->dir.get()) ::fsync(from->dir.get());
  return MoveResult{*from_rel, *to_rel};
}

Result<DeleteResult> delete_path(const Root& root, const DeleteRequest& req) {
  auto rel = root.relative(req.path);
  if (!rel) return std::unexpected(rel.error());
  if (rel->empty()) return fail(Errc::invalid_argument, "refusing to delete the workspace root itself");
  auto parent = root.open_parent(req.path);
  if (!parent) return std::unexpected(parent.error());
  int dir = parent->dir.get();
  const std::string& name = parent->name;
  struct stat st {};
  if (::fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) return fail(Errc::not_found, fmt::format("'{}' does not exist; nothing was deleted", req.path));
    return std::unexpected(detail::errno_error(errno, "inspect", req.path));
  }
  DeleteResult out;
  out.path = *rel;
  if (!S_ISDIR(st.st_mode)) {
    if (::unlinkat(dir, name.c_str(), 0) != 0) return std::unexpected(detail::errno_error(errno, "delete", req.path));
    out.deleted = 1;
    return out;
  }
  if (::unlinkat(dir, name.c_str(), AT_REMOVEDIR) == 0) {
    out.deleted = 1;
    return out;
  }
  if (errno != ENOTEMPTY && errno != EEXIST) return std::unexpected(detail::errno_error(errno, "delete", req.path));
  if (!req.recursive) {
    return fail(Errc::conflict, fmt::format("folder '{}' is not empty ({} entries); pass recursive: true to delete it "
                                            "and everything in it",
                                            req.path, count_entries(dir, name)));
  }
  auto removed = remove_tree(dir, name, *rel, out.deleted, 0);
  if (!removed) {
    Error e = removed.error();
    e.message += fmt::format(" ({} entries were already deleted)", out.deleted);
    return std::unexpected(std::move(e));
  }
  return out;
}

}  // namespace kiln::workspace
