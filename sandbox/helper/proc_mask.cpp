// /proc for the sandbox: a read-only procfs (no write to any /proc file, the sandbox's own
// processes included) with the entries that describe or steer the whole host masked, the way
// container runtimes do (runc's maskedPaths/readonlyPaths), plus what a root-run sandbox could read.
#include "sandbox/helper/proc_mask.h"

#include <cerrno>
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace kiln::helper {

namespace {

const char* kStep = "mounts";

// Hidden: host-wide state a build never needs, some of it readable by uid 0 alone (which the
// sandbox's root is on the host when Kiln runs as root): other processes' names in sched_debug
// and timer_list, the kernel's memory and log, keyrings.
const char* const kMasked[] = {
    "kcore",       "kmsg",      "kallsyms", "keys",     "key-users", "timer_list", "timer_stats",
    "sched_debug", "latency_stats", "sysrq-trigger", "acpi", "asound", "scsi", "firmware", "config.gz",
    "kpagecount",  "kpageflags", "kpagecgroup", "vmallocinfo", "slabinfo", "pagetypeinfo",
};

// Kept readable (toolchains and servers read /proc/sys, e.g. redis reads vm/overcommit_memory)
// but bound read-only once more, so that they stay read-only even if the mount's own flag could
// ever be lifted.
const char* const kReadOnly[] = {"sys", "irq", "bus", "fs", "pressure", "sysvipc"};

bool mask_one(const std::string& path, const std::string& null_dev, ProcReport& report, StepError& e) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return true;  // this kernel has no such entry
    return fail_errno(e, kStep, "inspecting " + path.substr(path.find("/proc")));
  }
  const std::string inside = path.substr(path.find("/proc"));
  if (S_ISDIR(st.st_mode)) {
    if (::mount("tmpfs", path.c_str(), "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=0,mode=0555") != 0)
      return fail_errno(e, kStep, "masking " + inside);
  } else {
    if (::mount(null_dev.c_str(), path.c_str(), nullptr, MS_BIND, nullptr) != 0)
      return fail_errno(e, kStep, "masking " + inside);
    // A bind keeps the source mount's flags; the mask itself must not be writable either.
    if (::mount(nullptr, path.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                nullptr) != 0)
      return fail_errno(e, kStep, "making the mask on " + inside + " read-only");
  }
  report.masked.push_back(inside);
  return true;
}

bool read_only_one(const std::string& path, ProcReport& report, StepError& e) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return true;
    return fail_errno(e, kStep, "inspecting " + path.substr(path.find("/proc")));
  }
  const std::string inside = path.substr(path.find("/proc"));
  if (::mount(path.c_str(), path.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0)
    return fail_errno(e, kStep, "binding " + inside + " onto itself");
  struct mount_attr attr {};
  attr.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC;
  if (::syscall(SYS_mount_setattr, AT_FDCWD, path.c_str(), AT_SYMLINK_NOFOLLOW | AT_RECURSIVE, &attr, sizeof attr) != 0) {
    if (errno != ENOSYS) return fail_errno(e, kStep, "making " + inside + " read-only");
    if (::mount(nullptr, path.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                nullptr) != 0)
      return fail_errno(e, kStep, "making " + inside + " read-only");
  }
  report.read_only.push_back(inside);
  return true;
}

}  // namespace

bool mount_proc(const std::string& dst, const std::string& null_dev, ProcReport& report, StepError& e) {
  if (::mkdir(dst.c_str(), 0555) != 0 && errno != EEXIST) return fail_errno(e, kStep, "creating mount point /proc");
  if (::mount("proc", dst.c_str(), "proc", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0)
    return fail_errno(e, kStep, "mounting a new /proc",
                      errno == EPERM ? "the kernel refuses a new /proc in a user namespace when the host's "
                                       "/proc is partly hidden (a container runtime masking /proc paths); "
                                       "run Kiln outside such a container or with --privileged"
                                     : "");
  for (const char* name : kReadOnly)
    if (!read_only_one(dst + "/" + name, report, e)) return false;
  for (const char* name : kMasked)
    if (!mask_one(dst + "/" + name, null_dev, report, e)) return false;
  return true;
}

}  // namespace kiln::helper
