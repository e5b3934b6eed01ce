// Export streams blobs straight into the tar writer (no copy of the tree on disk); import walks
// every entry's folders one component at a time with O_NOFOLLOW beneath a descriptor of the new
// folder, so no name in the archive, and no link it made earlier, can lead a write out of it.
#include "workspace/checkpoint_archive.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <utility>

#include <fmt/format.h>

#include "core/unique_fd.h"
#include "workspace/archive_stream.h"
#include "workspace/tar_format.h"

namespace kiln::workspace {

namespace {

std::string errno_text(int err) { return std::strerror(err); }

// A path for a message: control bytes shown as \xNN so a hostile name cannot paint the terminal.
std::string shown(std::string_view p) {
  std::string out;
  for (char c : p) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) out += fmt::format("\\x{:02x}", u);
    else out += c;
  }
  return out;
}

std::int64_t epoch_of(const std::string& iso) {
  std::tm tm{};
  if (iso.size() < 19 || !strptime(iso.c_str(), "%Y-%m-%dT%H:%M:%S", &tm)) return std::time(nullptr);
  return std::int64_t(timegm(&tm));
}

mode_t current_umask() {
  mode_t m = ::umask(022);
  ::umask(m);
  return m;
}

// Removes the temporary archive unless it was renamed into place.
struct TempFile {
  std::string path;
  ~TempFile() {
    if (!path.empty()) ::unlink(path.c_str());
  }
};

Result<void> copy_blob(const blobs::BlobStore& blobs, const TreeEntry& e, TarWriter& w) {
  UniqueFd fd(::open(blobs.path(e.sha).c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  struct stat st {};
  if (!fd || ::fstat(fd.get(), &st) != 0 || std::uint64_t(st.st_size) != e.size)
    return fail(Errc::not_found, fmt::format("the stored contents of {} are missing or damaged (blob {})", shown(e.path), e.sha));
  char buf[1 << 16];
  std::uint64_t left = e.size;
  while (left > 0) {
    ssize_t n = ::read(fd.get(), buf, std::size_t(std::min<std::uint64_t>(left, sizeof buf)));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return fail(Errc::io, fmt::format("cannot read the stored contents of {}", shown(e.path)));
    if (auto r = w.write_data(std::string_view(buf, std::size_t(n))); !r) return r;
    left -= std::uint64_t(n);
  }
  return {};
}

Result<std::string> read_small_blob(const blobs::BlobStore& blobs, const TreeEntry& e) {
  UniqueFd fd(::open(blobs.path(e.sha).c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) return fail(Errc::not_found, fmt::format("the stored target of the link {} is missing", shown(e.path)));
  std::string out(std::size_t(e.size), '\0');
  std::size_t have = 0;
  while (have < out.size()) {
    ssize_t n = ::read(fd.get(), out.data() + have, out.size() - have);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return fail(Errc::io, fmt::format("cannot read the stored target of the link {}", shown(e.path)));
    have += std::size_t(n);
  }
  return out;
}

}  // namespace

Result<ExportResult> export_checkpoint(CheckpointStore& store, const ExportRequest& req) {
  auto info = store.get(req.checkpoint_id);
  if (!info) return std::unexpected(info.error());
  auto tree = store.files(req.checkpoint_id);
  if (!tree) return std::unexpected(tree.error());

  namespace fs = std::filesystem;
  const fs::path out(req.output);
  struct stat st {};
  if (::lstat(req.output.c_str(), &st) == 0) {
    if (!req.force) return fail(Errc::conflict, fmt::format("{} already exists", req.output));
    if (S_ISDIR(st.st_mode)) return fail(Errc::conflict, fmt::format("{} is a folder", req.output));
  }
  const std::string dir = out.has_parent_path() ? out.parent_path().string() : ".";
  TempFile tmp{fmt::format("{}/.{}.kiln-export-XXXXXX", dir, out.filename().string())};
  UniqueFd fd(::mkostemp(tmp.path.data(), O_CLOEXEC));
  if (!fd) {
    int err = errno;
    tmp.path.clear();
    return fail(Errc::io, fmt::format("cannot write in {}: {}", dir, errno_text(err)));
  }
  auto output = ArchiveOutput::open(fd.get(), req.zstd);
  if (!output) return std::unexpected(output.error());
  TarWriter w([&](std::string_view d) { return (*output)->write(d); });

  ExportResult res;
  const std::int64_t mtime = epoch_of(info->created_at);
  const auto& blobs = store.blob_store();
  for (const auto& e : *tree) {
    TarHeader h;
    h.path = e.path;
    h.mode = e.mode & 07777;
    h.mtime = mtime;
    if (e.type == EntryType::dir) {
      h.type = TarType::dir;
      ++res.counts.folders;
    } else if (e.type == EntryType::symlink) {
      h.type = TarType::symlink;
      auto target = read_small_blob(blobs, e);
      if (!target) return std::unexpected(target.error());
      h.link_target = std::move(*target);
      ++res.counts.symlinks;
    } else if (e.type == EntryType::file) {
      h.type = TarType::file;
      h.size = e.size;
      ++res.counts.files;
      res.counts.bytes += e.size;
    } else {
      continue;
    }
    if (auto r = w.add(h); !r) return std::unexpected(r.error());
    if (h.type == TarType::file)
      if (auto r = copy_blob(blobs, e, w); !r) return std::unexpected(r.error());
  }
  if (auto r = w.finish(); !r) return std::unexpected(r.error());
  if (auto r = (*output)->finish(); !r) return std::unexpected(r.error());
  if (::fchmod(fd.get(), 0666 & ~current_umask()) != 0 || ::fsync(fd.get()) != 0)
    return fail(Errc::io, fmt::format("cannot write {}: {}", tmp.path, errno_text(errno)));
  if (::fstat(fd.get(), &st) == 0) res.archive_bytes = std::uint64_t(st.st_size);
  if (req.force) {
    if (::rename(tmp.path.c_str(), req.output.c_str()) != 0)
      return fail(Errc::io, fmt::format("cannot write {}: {}", req.output, errno_text(errno)));
    tmp.path.clear();
  } else if (::renameat2(AT_FDCWD, tmp.path.c_str(), AT_FDCWD, req.output.c_str(), RENAME_NOREPLACE) != 0) {
    int err = errno;
    if (err == EEXIST) return fail(Errc::conflict, fmt::format("{} already exists", req.output));
    // A file system without RENAME_NOREPLACE: link(2) refuses an existing name just the same.
    if (err != EINVAL && err != ENOSYS) return fail(Errc::io, fmt::format("cannot write {}: {}", req.output, errno_text(err)));
    if (::link(tmp.path.c_str(), req.output.c_str()) != 0) {
      err = errno;
      if (err == EEXIST) return fail(Errc::conflict, fmt::format("{} already exists", req.output));
      return fail(Errc::io, fmt::format("cannot write {}: {}", req.output, errno_text(err)));
    }
  } else {
    tmp.path.clear();
  }
  return res;
}

// --- import ---------------------------------------------------------------------------------

namespace {

// The components of an entry's path, or why it is refused. {} is the archive's root ("./").
Result<std::vector<std::string>> components(const std::string& path) {
  if (path.empty()) return fail(Errc::invalid_argument, "the archive has an entry with an empty name");
  if (path[0] == '/')
    return fail(Errc::path_escape, fmt::format("the archive's entry {} is an absolute path; Kiln unpacks only relative ones",
                                               shown(path)));
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= path.size()) {
    std::size_t slash = path.find('/', start);
    if (slash == std::string::npos) slash = path.size();
    std::string c = path.substr(start, slash - start);
    if (c == "..")
      return fail(Errc::path_escape, fmt::format("the archive's entry {} climbs out with \"..\"; it is refused", shown(path)));
    if (!c.empty() && c != ".") out.push_back(std::move(c));
    start = slash + 1;
  }
  return out;
}

std::string joined(const std::vector<std::string>& comps, std::size_t n) {
  std::string out;
  for (std::size_t i = 0; i < n; ++i) out += (i ? "/" : "") + comps[i];
  return out;
}

// The folder that holds comps.back(), opened one component at a time beneath `root` and never
// through a symbolic link; missing folders are made (0755 less the umask, as tar does).
Result<UniqueFd> open_parent(int root, const std::vector<std::string>& comps, const std::string& entry) {
  UniqueFd cur(::fcntl(root, F_DUPFD_CLOEXEC, 0));
  for (std::size_t i = 0; i + 1 < comps.size(); ++i) {
    const std::string& c = comps[i];
    int fd = ::openat(cur.get(), c.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT) {
      if (::mkdirat(cur.get(), c.c_str(), 0755) != 0 && errno != EEXIST)
        return fail(Errc::io, fmt::format("cannot make the folder {}: {}", shown(joined(comps, i + 1)), errno_text(errno)));
      fd = ::openat(cur.get(), c.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    }
    if (fd < 0) {
      const int err = errno;
      struct stat st {};
      if (::fstatat(cur.get(), c.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode))
        return fail(Errc::path_escape,
                    fmt::format("the archive's entry {} lies beneath the symbolic link {} (written through it, it could "
                                "land outside the new folder); it is refused",
                                shown(entry), shown(joined(comps, i + 1))));
      if (err == ENOTDIR)
        return fail(Errc::conflict, fmt::format("the archive's entry {} lies beneath {}, which it holds as a file",
                                                shown(entry), shown(joined(comps, i + 1))));
      return fail(Errc::io, fmt::format("cannot open the folder {}: {}", shown(joined(comps, i + 1)), errno_text(err)));
    }
    cur.reset(fd);
  }
  return cur;
}

Error twice(const std::string& entry) {
  return Error{Errc::conflict, fmt::format("the archive holds {} twice; it is refused", shown(entry))};
}

Result<void> write_file(int parent, const std::string& name, const TarHeader& h, TarReader& reader) {
  UniqueFd fd(::openat(parent, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd) {
    if (errno == EEXIST) return std::unexpected(twice(h.path));
    return fail(Errc::io, fmt::format("cannot create {}: {}", shown(h.path), errno_text(errno)));
  }
  char buf[1 << 16];
  for (;;) {
    auto n = reader.read_data(buf, sizeof buf);
    if (!n) return std::unexpected(n.error());
    if (*n == 0) break;
    for (std::size_t off = 0; off < *n;) {
      ssize_t w = ::write(fd.get(), buf + off, *n - off);
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) return fail(Errc::io, fmt::format("cannot write {}: {}", shown(h.path), errno_text(errno)));
      off += std::size_t(w);
    }
  }
  if (::fchmod(fd.get(), h.mode & 01777) != 0)
    return fail(Errc::io, fmt::format("cannot set the mode of {}: {}", shown(h.path), errno_text(errno)));
  return {};
}

// Empties a folder that was empty before a failed import (or removes the one it made).
void undo(const std::string& dest, bool created) {
  std::error_code ec;
  if (created) {
    std::filesystem::remove_all(dest, ec);
    return;
  }
  for (auto it = std::filesystem::directory_iterator(dest, ec); !ec && it != std::filesystem::directory_iterator(); ++it)
    std::filesystem::remove_all(it->path(), ec);
}

Result<ArchiveCounts> unpack_into(int root, const std::string& archive) {
  UniqueFd in(::open(archive.c_str(), O_RDONLY | O_CLOEXEC));
  if (!in) return fail(errno == ENOENT ? Errc::not_found : Errc::io, fmt::format("cannot open {}: {}", archive, errno_text(errno)));
  auto input = ArchiveInput::open(std::move(in), archive);
  if (!input) return std::unexpected(input.error());
  TarReader reader([&](char* buf, std::size_t n) { return (*input)->read(buf, n); });

  ArchiveCounts counts;
  std::vector<std::pair<std::vector<std::string>, std::uint32_t>> folder_modes;
  std::uint64_t entries = 0;
  for (;;) {
    auto next = reader.next();
    if (!next) return std::unexpected(next.error());
    if (!*next) break;
    const TarHeader& h = **next;
    ++entries;
    if (h.type != TarType::file && h.type != TarType::dir && h.type != TarType::symlink)
      return fail(Errc::unsupported,
                  fmt::format("the archive's entry {} is a {} (tar type '{}'); Kiln unpacks files, folders and symbolic "
                              "links only",
                              shown(h.path), to_string(h.type), h.typeflag ? std::string(1, h.typeflag) : "\\0"));
    auto comps = components(h.path);
    if (!comps) return std::unexpected(comps.error());
    if (comps->empty()) {
      if (h.type == TarType::dir) continue;  // "./": the new folder itself
      return fail(Errc::invalid_argument, fmt::format("the archive's entry {} names no file", shown(h.path)));
    }
    if (h.type != TarType::dir && (h.mode & (S_ISUID | S_ISGID)))
      return fail(Errc::invalid_argument,
                  fmt::format("the archive's entry {} is setuid or setgid (mode {:04o}); Kiln does not unpack those",
                              shown(h.path), h.mode));
    auto parent = open_parent(root, *comps, h.path);
    if (!parent) return std::unexpected(parent.error());
    const std::string& name = comps->back();
    if (h.type == TarType::file) {
      if (auto r = write_file(parent->get(), name, h, reader); !r) return std::unexpected(r.error());
      ++counts.files;
      counts.bytes += h.size;
    } else if (h.type == TarType::symlink) {
      if (h.link_target.empty())
        return fail(Errc::invalid_argument, fmt::format("the archive's link {} has an empty target", shown(h.path)));
      if (::symlinkat(h.link_target.c_str(), parent->get(), name.c_str()) != 0) {
        if (errno == EEXIST) return std::unexpected(twice(h.path));
        return fail(Errc::io, fmt::format("cannot make the link {}: {}", shown(h.path), errno_text(errno)));
      }
      ++counts.symlinks;
    } else {
      if (::mkdirat(parent->get(), name.c_str(), 0700) != 0) {
        struct stat st {};
        // A folder made earlier as the parent of an entry is fine; anything else there is not.
        if (errno != EEXIST || ::fstatat(parent->get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode))
          return errno == EEXIST ? std::unexpected(twice(h.path))
                                 : fail(Errc::io, fmt::format("cannot make the folder {}: {}", shown(h.path), errno_text(errno)));
      }
      // setgid and setuid mean nothing Kiln keeps on a folder: dropped rather than refused.
      folder_modes.emplace_back(std::move(*comps), h.mode & 01777);
      ++counts.folders;
    }
  }
  if (entries == 0) return fail(Errc::invalid_argument, fmt::format("{} holds no entries; is it a tar archive?", archive));
  // Deepest first, so a read-only folder gets its mode after everything beneath it is written.
  for (auto it = folder_modes.rbegin(); it != folder_modes.rend(); ++it) {
    auto& [comps, mode] = *it;
    auto parent = open_parent(root, comps, joined(comps, comps.size()));
    if (!parent) return std::unexpected(parent.error());
    if (::fchmodat(parent->get(), comps.back().c_str(), mode, 0) != 0)
      return fail(Errc::io, fmt::format("cannot set the mode of {}: {}", shown(joined(comps, comps.size())), errno_text(errno)));
  }
  return counts;
}

}  // namespace

Result<ArchiveCounts> unpack_archive(const std::string& archive, const std::string& dest) {
  bool created = false;
  if (::mkdir(dest.c_str(), 0755) == 0) {
    created = true;
  } else if (errno != EEXIST) {
    return fail(Errc::io, fmt::format("cannot make the folder {}: {}", dest, errno_text(errno)));
  }
  UniqueFd root(::open(dest.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!root) return fail(Errc::conflict, fmt::format("{} exists and is not a folder", dest));
  if (!created) {
    UniqueFd probe(::fcntl(root.get(), F_DUPFD_CLOEXEC, 0));
    DIR* d = ::fdopendir(probe.release());
    bool empty = true;
    if (d) {
      while (dirent* e = ::readdir(d))
        if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) empty = false;
      ::closedir(d);
    }
    if (!empty)
      return fail(Errc::conflict, fmt::format("{} exists and is not empty; import into a new or empty folder", dest));
  }
  auto counts = unpack_into(root.get(), archive);
  if (!counts) undo(dest, created);
  return counts;
}

}  // namespace kiln::workspace
