// Mount construction in the bubblewrap style: a tmpfs base, pivot into it so the host tree sits at
// /oldroot, build /newroot from binds of /oldroot, pivot again and detach. Binds are recursive and
// then made read-only recursively with mount_setattr(2), so no submount stays writable: the
// read-only binds all at once, with the root skeleton, before anything writable is mounted.
#include "sandbox/helper/mounts.h"

#include "core/path_under.h"
#include "core/open_dir.h"
#include "core/unique_fd.h"
#include "sandbox/helper/proc_mask.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <unordered_map>
#include <unordered_set>
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace kiln::helper {

namespace {

const char* kStep = "mounts";

enum class Kind { bind_dir, bind_file, symlink, workspace, data, tmp, dev, proc };

struct Entry {
  std::string path;    // inside
  std::string source;  // host path (resolved parent + name); for symlink, the link target
  Kind kind;
};

// openat2 with RESOLVE_NO_SYMLINKS (kiln passes a path it resolved), then the folder must be the
// one kiln checked. Run in the sandbox's new mount namespace, so the bind from the descriptor is
// a bind of a mount of this namespace.
bool open_workspace(const Spec& spec, UniqueFd& out, StepError& e) {
  int fd = open_dir_no_symlinks(spec.workspace.c_str());
  if (fd < 0) {
    if (errno == ELOOP)
      return fail_plain(e, kStep, "the workspace " + spec.workspace + " now has a symbolic link in its path",
                        "it changed after kiln checked it (someone swapped a folder for a link); refusing to mount it");
    return fail_errno(e, kStep, "opening the workspace " + spec.workspace);
  }
  out.reset(fd);
  struct stat st {};
  if (::fstat(out.get(), &st) != 0) return fail_errno(e, kStep, "inspecting the workspace " + spec.workspace);
  if (!S_ISDIR(st.st_mode)) return fail_plain(e, kStep, "the workspace " + spec.workspace + " is not a directory");
  if (spec.workspace_identity &&
      (std::uint64_t(st.st_dev) != spec.workspace_dev || std::uint64_t(st.st_ino) != spec.workspace_ino))
    return fail_plain(e, kStep, "the workspace " + spec.workspace + " is not the folder kiln checked",
                      "it was renamed or replaced while the sandbox was being set up; refusing to mount it");
  return true;
}

// A data_binds source, opened the way the workspace is (no symlink anywhere in its path) and
// compared with the folder kiln prepared: the sandbox owns what is inside it, never where it is.
bool open_data_bind(const DataBind& b, UniqueFd& out, StepError& e) {
  int fd = open_dir_no_symlinks(b.source.c_str());
  if (fd < 0) return fail_errno(e, kStep, "opening the data folder " + b.source);
  out.reset(fd);
  struct stat st {};
  if (::fstat(out.get(), &st) != 0) return fail_errno(e, kStep, "inspecting the data folder " + b.source);
  if (!S_ISDIR(st.st_mode) || std::uint64_t(st.st_dev) != b.dev || std::uint64_t(st.st_ino) != b.ino)
    return fail_plain(e, kStep, "the data folder " + b.source + " is not the folder kiln prepared",
                      "it was replaced while the sandbox was being set up; refusing to mount it");
  return true;
}

// Mount points made so far: most entries share their parents (/newroot, /newroot/etc), and a
// mkdir that only answers EEXIST still walks the path and locks the parent.
class MountPoints {
 public:
  bool dir(const std::string& path, StepError& e) {
    std::size_t pos = 1;
    while (pos <= path.size()) {
      std::size_t next = path.find('/', pos);
      if (next == std::string::npos) next = path.size();
      std::string prefix = path.substr(0, next);
      if (!made_.contains(prefix)) {
        if (::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST)
          return fail_errno(e, kStep, "creating mount point " + prefix);
        made_.insert(std::move(prefix));
      }
      pos = next + 1;
    }
    return true;
  }

 private:
  std::unordered_set<std::string> made_;
};

std::string parent_of(const std::string& p) {
  auto slash = p.rfind('/');
  return slash == 0 ? "/" : p.substr(0, slash);
}

// mount_setattr only adds flags, so flags the kernel locked on the host's mount stay as they are;
// the remount fallback (kernels before 5.12) must repeat them itself or get EPERM.
bool restrict_mount(const std::string& dst, std::uint64_t attrs, bool recursive, StepError& e) {
  struct mount_attr attr {};
  attr.attr_set = attrs;
  unsigned flags = AT_SYMLINK_NOFOLLOW | (recursive ? AT_RECURSIVE : 0);
  if (::syscall(SYS_mount_setattr, AT_FDCWD, dst.c_str(), flags, &attr, sizeof attr) == 0) return true;
  if (errno != ENOSYS) return fail_errno(e, kStep, "mount_setattr " + dst);
  struct statvfs sv {};
  if (::statvfs(dst.c_str(), &sv) != 0) return fail_errno(e, kStep, "statvfs " + dst);
  unsigned long mf = MS_REMOUNT | MS_BIND;
  if (attrs & MOUNT_ATTR_RDONLY) mf |= MS_RDONLY;
  if ((attrs & MOUNT_ATTR_NOSUID) || (sv.f_flag & ST_NOSUID)) mf |= MS_NOSUID;
  if ((attrs & MOUNT_ATTR_NODEV) || (sv.f_flag & ST_NODEV)) mf |= MS_NODEV;
  if ((attrs & MOUNT_ATTR_NOEXEC) || (sv.f_flag & ST_NOEXEC)) mf |= MS_NOEXEC;
  if (sv.f_flag & ST_NOATIME) mf |= MS_NOATIME;
  if (sv.f_flag & ST_NODIRATIME) mf |= MS_NODIRATIME;
  if (sv.f_flag & ST_RELATIME) mf |= MS_RELATIME;
  if (::mount(nullptr, dst.c_str(), nullptr, mf, nullptr) != 0) return fail_errno(e, kStep, "remounting " + dst);
  return true;
}

bool make_mount_point(MountPoints& points, const std::string& dst, bool is_dir, StepError& e) {
  if (is_dir) return points.dir(dst, e);
  if (!points.dir(parent_of(dst), e)) return false;
  int fd = ::open(dst.c_str(), O_RDONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) return fail_errno(e, kStep, "creating mount point " + dst);
  ::close(fd);
  return true;
}

// attrs 0: the caller restricts the mount later (the read-only binds, all together).
bool bind(MountPoints& points, const std::string& src, const std::string& dst, bool is_dir, std::uint64_t attrs,
          StepError& e) {
  if (!make_mount_point(points, dst, is_dir, e)) return false;
  if (::mount(src.c_str(), dst.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0)
    return fail_errno(e, kStep, "bind " + src.substr(8) + " -> " + dst.substr(8));
  return attrs == 0 || restrict_mount(dst, attrs, true, e);
}

bool mount_tmpfs(MountPoints& points, const std::string& dst, const std::string& opts, unsigned long flags,
                 StepError& e) {
  if (!points.dir(dst, e)) return false;
  if (::mount("tmpfs", dst.c_str(), "tmpfs", flags, opts.c_str()) != 0)
    return fail_errno(e, kStep, "mounting tmpfs on " + (dst.size() > 8 ? dst.substr(8) : dst));
  return true;
}

bool build_dev(MountPoints& points, MountReport& report, unsigned shm_mb, StepError& e) {
  if (!mount_tmpfs(points, "/newroot/dev", "mode=0755,size=64k", MS_NOSUID | MS_NOEXEC, e)) return false;
  static const char* const nodes[] = {"null", "zero", "full", "random", "urandom", "tty"};
  for (const char* n : nodes) {
    std::string src = std::string("/oldroot/dev/") + n;
    struct stat st {};
    if (::stat(src.c_str(), &st) != 0 || !S_ISCHR(st.st_mode)) continue;
    std::string dst = std::string("/newroot/dev/") + n;
    int fd = ::open(dst.c_str(), O_RDONLY | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0) return fail_errno(e, kStep, "creating /dev/" + std::string(n));
    ::close(fd);
    if (::mount(src.c_str(), dst.c_str(), nullptr, MS_BIND, nullptr) != 0)
      return fail_errno(e, kStep, "bind /dev/" + std::string(n));
    if (!restrict_mount(dst, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC, false, e)) return false;
    report.dev_nodes.push_back(std::string("/dev/") + n);
  }
  static const char* const links[][2] = {{"/proc/self/fd", "fd"},
                                         {"/proc/self/fd/0", "stdin"},
                                         {"/proc/self/fd/1", "stdout"},
                                         {"/proc/self/fd/2", "stderr"}};
  for (const auto& l : links) {
    std::string dst = std::string("/newroot/dev/") + l[1];
    if (::symlink(l[0], dst.c_str()) != 0) return fail_errno(e, kStep, "symlink /dev/" + std::string(l[1]));
  }
  return mount_tmpfs(points, "/newroot/dev/shm", "mode=1777,size=" + std::to_string(shm_mb) + "m",
                     MS_NOSUID | MS_NODEV | MS_NOEXEC, e);
}

}  // namespace

bool build_root(const Spec& spec, MountReport& report, StepError& e) {
  // Resolve in the host's view first: parents through their symlinks (so /lib -> usr/lib and the
  // like cost nothing later), the last component as it is (a symlink is recreated, not followed).
  std::vector<Entry> entries;
  std::unordered_map<std::string, std::string> real_parents;  // most entries share /etc or /usr
  for (const auto& p : spec.ro_binds) {
    if (path_under(p, "/proc") || path_under(p, "/dev") || p == "/tmp")
      return fail_plain(e, kStep, "ro_binds entry " + p + " would replace the sandbox's own /proc, /dev or /tmp");
    const std::string parent = parent_of(p);
    auto known = real_parents.find(parent);
    if (known == real_parents.end()) {
      char real[PATH_MAX];
      if (::realpath(parent.c_str(), real) == nullptr) {
        if (errno != ENOENT && errno != ENOTDIR) return fail_errno(e, kStep, "resolving " + p);
        real[0] = '\0';  // missing: every entry under it is skipped
      }
      known = real_parents.emplace(parent, real).first;
    }
    const std::string& real = known->second;
    if (real.empty()) {
      report.skipped.push_back(p);
      continue;
    }
    std::string src = real + (real == "/" ? "" : "/") + p.substr(p.rfind('/') + 1);
    struct stat st {};
    if (::lstat(src.c_str(), &st) != 0) {
      if (errno == ENOENT) {
        report.skipped.push_back(p);
        continue;
      }
      return fail_errno(e, kStep, "lstat " + src);
    }
    if (S_ISLNK(st.st_mode)) {
      char target[PATH_MAX];
      ssize_t n = ::readlink(src.c_str(), target, sizeof target - 1);
      if (n < 0) return fail_errno(e, kStep, "readlink " + src);
      entries.push_back({p, std::string(target, static_cast<std::size_t>(n)), Kind::symlink});
    } else {
      entries.push_back({p, src, S_ISDIR(st.st_mode) ? Kind::bind_dir : Kind::bind_file});
    }
  }
  const std::string& ws = spec.workspace;
  if (ws == "/tmp" || ws == "/dev/shm" || path_under(ws, "/proc") || path_under(ws, "/dev"))
    return fail_plain(e, kStep, "the workspace cannot be " + ws + ": it would replace a private sandbox mount");
  // The workspace is bound from a descriptor, not by path: resolving the path at mount time would
  // follow whatever a user who owns a folder on it has swapped in since kiln checked it.
  UniqueFd ws_fd;
  if (!open_workspace(spec, ws_fd, e)) return false;
  entries.push_back({"/tmp", "", Kind::tmp});
  entries.push_back({"/dev", "", Kind::dev});
  entries.push_back({"/proc", "", Kind::proc});
  entries.push_back({ws, "/proc/self/fd/" + std::to_string(ws_fd.get()), Kind::workspace});
  std::vector<UniqueFd> data_fds(spec.data_binds.size());
  for (std::size_t i = 0; i < spec.data_binds.size(); ++i) {
    if (!open_data_bind(spec.data_binds[i], data_fds[i], e)) return false;
    entries.push_back({spec.data_binds[i].target, "/proc/self/fd/" + std::to_string(data_fds[i].get()), Kind::data});
  }
  // Parents before children, so a workspace under /tmp or /home lands on top of what holds it.
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.path < b.path; });

  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
    return fail_errno(e, kStep, "making / private");
  if (::mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0700,size=64k") != 0)
    return fail_errno(e, kStep, "mounting the base tmpfs on /tmp");
  if (::mkdir("/tmp/newroot", 0755) != 0 || ::mkdir("/tmp/oldroot", 0755) != 0)
    return fail_errno(e, kStep, "creating /tmp/newroot");
  if (::mount("tmpfs", "/tmp/newroot", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m") != 0)
    return fail_errno(e, kStep, "mounting the root tmpfs");
  if (::syscall(SYS_pivot_root, "/tmp", "/tmp/oldroot") != 0) return fail_errno(e, kStep, "pivot_root to the base tmpfs");
  if (::chdir("/") != 0) return fail_errno(e, kStep, "chdir /");

  // Two rounds. First the read-only binds and links that sit directly in the root skeleton, with
  // the mount points of everything else there, then the whole tree is made read-only in one call
  // (one mount_setattr instead of one per bind: each takes the kernel's global namespace lock).
  // Then the writable mounts (/tmp, /dev, /proc, the workspace, data folders) and whatever lies
  // inside another mount, each restricted as it is mounted: a bind inside another bind gets its
  // mount point only once its parent is read-only, so a missing one is never made on the host.
  const std::uint64_t ro = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
  auto nested = [&](const Entry& en) {
    return std::any_of(entries.begin(), entries.end(),
                       [&](const Entry& o) { return &o != &en && o.path != en.path && path_under(en.path, o.path); });
  };
  auto first_round = [&](const Entry& en) {
    return (en.kind == Kind::symlink || en.kind == Kind::bind_dir || en.kind == Kind::bind_file) && !nested(en);
  };
  MountPoints points;
  std::vector<std::string> ro_mounts;
  for (const auto& en : entries) {
    std::string dst = "/newroot" + en.path;
    if (!first_round(en)) {
      if (!nested(en) && !points.dir(dst, e)) return false;  // a writable mount's point, in the skeleton
      continue;
    }
    if (en.kind == Kind::symlink) {
      if (!points.dir(parent_of(dst), e)) return false;
      if (::symlink(en.source.c_str(), dst.c_str()) != 0 && errno != EEXIST)
        return fail_errno(e, kStep, "symlink " + en.path);
      continue;
    }
    if (!bind(points, "/oldroot" + en.source, dst, en.kind == Kind::bind_dir, 0, e)) return false;
    report.ro.push_back({en.path, en.kind == Kind::bind_dir});
    ro_mounts.push_back(std::move(dst));
  }
  struct mount_attr attr {};
  attr.attr_set = ro;
  if (::syscall(SYS_mount_setattr, AT_FDCWD, "/newroot", AT_SYMLINK_NOFOLLOW | AT_RECURSIVE, &attr, sizeof attr) != 0) {
    if (errno != ENOSYS) return fail_errno(e, kStep, "mount_setattr /newroot");
    // Before 5.12 a remount covers one mount only: each bind, then the skeleton.
    for (const auto& dst : ro_mounts)
      if (!restrict_mount(dst, ro, true, e)) return false;
    if (!restrict_mount("/newroot", MOUNT_ATTR_RDONLY, false, e)) return false;
  }

  for (const auto& en : entries) {
    if (first_round(en)) continue;
    std::string dst = "/newroot" + en.path;
    switch (en.kind) {
      case Kind::symlink:
        if (!points.dir(parent_of(dst), e)) return false;
        if (::symlink(en.source.c_str(), dst.c_str()) != 0 && errno != EEXIST)
          return fail_errno(e, kStep, "symlink " + en.path);
        break;
      case Kind::bind_dir:
      case Kind::bind_file:
        if (!bind(points, "/oldroot" + en.source, dst, en.kind == Kind::bind_dir, ro, e)) return false;
        report.ro.push_back({en.path, en.kind == Kind::bind_dir});
        break;
      case Kind::data:
        if (!bind(points, "/oldroot" + en.source, dst, true, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, e)) return false;
        break;
      case Kind::workspace: {
        std::uint64_t attrs = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
        if (!spec.workspace_writable) attrs |= MOUNT_ATTR_RDONLY;
        if (!bind(points, "/oldroot" + en.source, dst, true, attrs, e)) return false;
        break;
      }
      case Kind::tmp:
        if (!mount_tmpfs(points, dst, "mode=1777,size=" + std::to_string(spec.tmp_size_mb) + "m", MS_NOSUID | MS_NODEV,
                         e))
          return false;
        break;
      case Kind::dev:
        if (!build_dev(points, report, spec.tmp_size_mb, e)) return false;
        break;
      case Kind::proc:
        if (!mount_proc(dst, "/oldroot/dev/null", report.proc, e)) return false;
        break;
    }
  }
  // Nothing but the mounts above may be written: the /dev skeleton becomes read-only too.
  return restrict_mount("/newroot/dev", MOUNT_ATTR_RDONLY, false, e);
}

bool enter_root(StepError& e) {
  // pivot_root(".", ".") stacks the old root on top of the new one; detaching it leaves only ours.
  if (::chdir("/newroot") != 0) return fail_errno(e, "pivot_root", "chdir /newroot");
  if (::syscall(SYS_pivot_root, ".", ".") != 0) return fail_errno(e, "pivot_root", "pivot_root");
  if (::umount2(".", MNT_DETACH) != 0) return fail_errno(e, "pivot_root", "detaching the old root");
  if (::chdir("/") != 0) return fail_errno(e, "pivot_root", "chdir /");
  return true;
}

}  // namespace kiln::helper
