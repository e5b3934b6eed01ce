// Deny list against the syscalls a build never needs and that widen the kernel's attack surface.
// EPERM rather than kill so tools print a clean error; other ABIs (i386, x32) kill the process,
// since a filter written for x86_64 numbers means nothing for them. Compiled with libseccomp at
// build time (main.cpp); kiln-sandbox embeds the resulting BPF program.
#include "seccomp_rules.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/seccomp.h>

namespace kiln::seccomp_gen {

namespace {

const char* const kDenied[] = {
    "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "process_madvise", "kcmp",
    "mount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree", "fsopen", "fsmount",
    "fsconfig", "fspick", "mount_setattr", "open_tree_attr", "bpf", "keyctl", "add_key", "request_key",
    "perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register",
    "open_by_handle_at", "name_to_handle_at", "unshare", "setns", "kexec_load", "kexec_file_load",
    "init_module", "finit_module", "delete_module", "reboot", "swapon", "swapoff", "acct", "quotactl",
    "quotactl_fd", "syslog", "iopl", "ioperm", "lookup_dcookie", "fanotify_init", "uselib", "vhangup",
    "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "nfsservctl", "_sysctl",
};

// TIOCSTI / TIOCLINUX: the kernel takes ioctl's request as a 32-bit value, so only the low half
// is compared; high garbage must not slip past.
constexpr scmp_datum_t kTiocsti = 0x5412;
constexpr scmp_datum_t kTioclinux = 0x541C;

int add(scmp_filter_ctx ctx, int nr, unsigned n, const scmp_arg_cmp* cmps) {
  return seccomp_rule_add_array(ctx, SCMP_ACT_ERRNO(EPERM), nr, n, cmps);
}

}  // namespace

bool build_program(std::vector<sock_filter>& out, std::string& error) {
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
  if (ctx == nullptr) {
    error = "seccomp_init failed";
    return false;
  }
  auto bail = [&](int rc, const std::string& what) {
    error = what + ": " + std::strerror(-rc);
    seccomp_release(ctx);
    return false;
  };
  int rc = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
  if (rc < 0) return bail(rc, "setting the bad-arch action");
  // NNP is set by the shepherd itself before loading.
  rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0);
  if (rc < 0) return bail(rc, "clearing the NNP attribute");
  // Syscall numbers dispatched as a binary tree rather than one long chain of compares: the kernel
  // checks the whole program and JIT-compiles it at every shepherd's load, and runs it for each
  // syscall of the command (openat, ioctl, clone carry argument tests and so are never cached).
  rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
  if (rc < 0) return bail(rc, "asking for the binary-tree layout");

  for (const char* name : kDenied) {
    int nr = seccomp_syscall_resolve_name(name);
    if (nr == __NR_SCMP_ERROR) continue;  // unknown to this libseccomp: nothing to deny
    rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0);
    if (rc < 0) return bail(rc, std::string("denying ") + name);
  }

  // clone3 passes its flags in memory the filter cannot read: ENOSYS makes libc fall back to clone.
  rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
  if (rc < 0) return bail(rc, "clone3");
  const scmp_datum_t ns_flags[] = {CLONE_NEWUSER, CLONE_NEWNS, CLONE_NEWPID, CLONE_NEWNET,
                                   CLONE_NEWIPC, CLONE_NEWUTS, CLONE_NEWCGROUP};
  for (scmp_datum_t f : ns_flags) {
    scmp_arg_cmp c = SCMP_A0(SCMP_CMP_MASKED_EQ, f, f);
    if ((rc = add(ctx, SCMP_SYS(clone), 1, &c)) < 0) return bail(rc, "clone namespace flags");
  }
  for (scmp_datum_t req : {kTiocsti, kTioclinux}) {
    scmp_arg_cmp c = SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffULL, req);
    if ((rc = add(ctx, SCMP_SYS(ioctl), 1, &c)) < 0) return bail(rc, "ioctl TIOCSTI/TIOCLINUX");
  }
  // Device nodes: the mounts are nodev anyway; this keeps mknod from even creating one.
  for (scmp_datum_t type : {static_cast<scmp_datum_t>(S_IFCHR), static_cast<scmp_datum_t>(S_IFBLK)}) {
    scmp_arg_cmp c1 = SCMP_A1(SCMP_CMP_MASKED_EQ, S_IFMT, type);
    if ((rc = add(ctx, SCMP_SYS(mknod), 1, &c1)) < 0) return bail(rc, "mknod");
    scmp_arg_cmp c2 = SCMP_A2(SCMP_CMP_MASKED_EQ, S_IFMT, type);
    if ((rc = add(ctx, SCMP_SYS(mknodat), 1, &c2)) < 0) return bail(rc, "mknodat");
  }
  // Set-id bits: with Kiln run as root the sandbox's uid 0 is the host's, and a setuid file it
  // makes in the workspace is a setuid-root program on the host (the nosuid mount holds inside
  // only). So no mode carrying S_ISUID or S_ISGID is set by chmod, by a create, or by mknod.
  // openat2 and fchmodat2 pass what matters where the filter cannot read it (a struct, or a
  // number older libcs do not use): ENOSYS makes callers fall back to openat and fchmodat.
  for (scmp_datum_t bit : {static_cast<scmp_datum_t>(S_ISUID), static_cast<scmp_datum_t>(S_ISGID)}) {
    scmp_arg_cmp a1 = SCMP_A1(SCMP_CMP_MASKED_EQ, bit, bit);
    scmp_arg_cmp a2 = SCMP_A2(SCMP_CMP_MASKED_EQ, bit, bit);
    scmp_arg_cmp a3 = SCMP_A3(SCMP_CMP_MASKED_EQ, bit, bit);
    if ((rc = add(ctx, SCMP_SYS(chmod), 1, &a1)) < 0 || (rc = add(ctx, SCMP_SYS(fchmod), 1, &a1)) < 0 ||
        (rc = add(ctx, SCMP_SYS(fchmodat), 1, &a2)) < 0 || (rc = add(ctx, SCMP_SYS(creat), 1, &a1)) < 0 ||
        (rc = add(ctx, SCMP_SYS(mknod), 1, &a1)) < 0 || (rc = add(ctx, SCMP_SYS(mknodat), 1, &a2)) < 0)
      return bail(rc, "set-id modes");
    // open/openat read their mode only when creating (O_CREAT or O_TMPFILE); otherwise the mode
    // register holds whatever was there, which must not refuse a plain open.
    for (scmp_datum_t create : {static_cast<scmp_datum_t>(O_CREAT), static_cast<scmp_datum_t>(__O_TMPFILE)}) {
      scmp_arg_cmp open_cmp[] = {SCMP_A1(SCMP_CMP_MASKED_EQ, create, create), a2};
      scmp_arg_cmp openat_cmp[] = {SCMP_A2(SCMP_CMP_MASKED_EQ, create, create), a3};
      if ((rc = add(ctx, SCMP_SYS(open), 2, open_cmp)) < 0 || (rc = add(ctx, SCMP_SYS(openat), 2, openat_cmp)) < 0)
        return bail(rc, "set-id modes on create");
    }
  }
  constexpr int kOpenat2 = 437, kFchmodat2 = 452;  // x86_64; Debian 12's libseccomp predates fchmodat2
  for (int nr : {kOpenat2, kFchmodat2}) {
    if ((rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), nr, 0)) < 0) return bail(rc, "openat2/fchmodat2");
  }
  // personality: only PER_LINUX (0) and the query 0xffffffff (no READ_IMPLIES_EXEC, no
  // ADDR_NO_RANDOMIZE). libseccomp cannot compare one argument twice in a rule, so "neither value"
  // is spelled as single masked tests. A 32-bit value that is neither all zeros nor all ones has,
  // going round its bits, some bit set whose next bit (bit 0 after bit 31) is clear; one rule per
  // such pair covers them all, and neither 0 nor 0xffffffff matches any. The kernel reads the
  // argument as 32 bits, so the high half is not compared.
  for (int bit = 0; bit < 32; ++bit) {
    const scmp_datum_t set = 1ULL << bit, next_clear = 1ULL << ((bit + 1) % 32);
    scmp_arg_cmp c = SCMP_A0(SCMP_CMP_MASKED_EQ, set | next_clear, set);
    if ((rc = add(ctx, SCMP_SYS(personality), 1, &c)) < 0) return bail(rc, "personality");
  }

  int mfd = static_cast<int>(::syscall(SYS_memfd_create, "kiln-seccomp", MFD_CLOEXEC));
  if (mfd < 0) {
    error = std::string("memfd_create: ") + std::strerror(errno);
    seccomp_release(ctx);
    return false;
  }
  rc = seccomp_export_bpf(ctx, mfd);
  seccomp_release(ctx);
  if (rc < 0) {
    ::close(mfd);
    error = std::string("seccomp_export_bpf: ") + std::strerror(-rc);
    return false;
  }
  off_t size = ::lseek(mfd, 0, SEEK_END);
  if (size <= 0 || size % static_cast<off_t>(sizeof(sock_filter)) != 0) {
    ::close(mfd);
    error = "seccomp_export_bpf produced no program";
    return false;
  }
  out.resize(static_cast<std::size_t>(size) / sizeof(sock_filter));
  ssize_t n = ::pread(mfd, out.data(), static_cast<std::size_t>(size), 0);
  ::close(mfd);
  if (n != size) {
    error = "reading the exported filter back failed";
    return false;
  }
  return true;
}

}  // namespace kiln::seccomp_gen
