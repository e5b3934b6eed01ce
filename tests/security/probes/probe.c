// Attack probes for the security suite. Compiled on the host with `cc` into the test's workspace
// and run inside a Kiln sandbox. Every line printed is "name rc errno" (rc -1 and errno on failure)
// unless a mode says otherwise, so the tests can parse it.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

static void report(const char* name, long rc) {
  printf("%s %ld %d\n", name, rc, rc < 0 ? errno : 0);
  fflush(stdout);
}

// Escape syscalls the seccomp filter must refuse (cases 6, 10, 13).
static int syscalls(void) {
  // PTRACE_TRACEME in a child of its own: if it worked, signals would stop this process.
  pid_t tp = fork();
  if (tp == 0) {
    report("ptrace_traceme", syscall(SYS_ptrace, PTRACE_TRACEME, 0, 0, 0));
    _exit(0);
  }
  if (tp > 0) waitpid(tp, 0, 0);
  report("ptrace_attach_pid1", syscall(SYS_ptrace, PTRACE_ATTACH, 1, 0, 0));
  char buf[16];
  struct iovec local = {buf, sizeof buf}, remote = {(void*)0x400000, sizeof buf};
  report("process_vm_readv_pid1", syscall(SYS_process_vm_readv, 1, &local, 1, &remote, 1, 0));
  report("unshare_user", syscall(SYS_unshare, CLONE_NEWUSER));
  report("unshare_mount", syscall(SYS_unshare, CLONE_NEWNS));
  report("unshare_net", syscall(SYS_unshare, CLONE_NEWNET));
  report("setns", syscall(SYS_setns, 0, 0));
  long pid = syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0);
  if (pid == 0) _exit(0);
  report("clone_newuser", pid);
  if (pid > 0) waitpid((pid_t)pid, 0, 0);
  pid = syscall(SYS_clone, CLONE_NEWNS | CLONE_NEWPID | SIGCHLD, 0, 0, 0, 0);
  if (pid == 0) _exit(0);
  report("clone_newns", pid);
  if (pid > 0) waitpid((pid_t)pid, 0, 0);
  struct clone_args ca;
  memset(&ca, 0, sizeof ca);
  ca.flags = CLONE_NEWUSER;
  ca.exit_signal = SIGCHLD;
  pid = syscall(SYS_clone3, &ca, sizeof ca);
  if (pid == 0) _exit(0);
  report("clone3_newuser", pid);
  if (pid > 0) waitpid((pid_t)pid, 0, 0);
  report("mount_tmpfs", syscall(SYS_mount, "none", "/tmp", "tmpfs", 0, 0));
  report("mount_remount_rw_usr", syscall(SYS_mount, "none", "/usr", 0, MS_REMOUNT | MS_BIND, 0));
  report("mount_bind_root", syscall(SYS_mount, "/", "/tmp", 0, MS_BIND | MS_REC, 0));
  report("umount2", syscall(SYS_umount2, "/usr", MNT_DETACH));
  report("pivot_root", syscall(SYS_pivot_root, "/tmp", "/tmp"));
  report("chroot", syscall(SYS_chroot, "/tmp"));
  report("open_tree", syscall(SYS_open_tree, AT_FDCWD, "/", 1));
  report("fsopen", syscall(SYS_fsopen, "tmpfs", 0));
  report("move_mount", syscall(SYS_move_mount, -1, "", AT_FDCWD, "/tmp", 0));
  report("io_uring_setup", syscall(SYS_io_uring_setup, 8, (void*)0));
  report("bpf", syscall(SYS_bpf, 0, 0, 0));
  report("perf_event_open", syscall(SYS_perf_event_open, 0, 0, -1, -1, 0));
  report("userfaultfd", syscall(SYS_userfaultfd, 0));
  report("keyctl", syscall(SYS_keyctl, 0, 0, 0, 0, 0));
  report("add_key", syscall(SYS_add_key, "user", "kilnsec", "v", 1, -3 /* KEY_SPEC_SESSION_KEYRING */));
  report("request_key", syscall(SYS_request_key, "user", "kilnsec", 0, 0));
  report("open_by_handle_at", syscall(SYS_open_by_handle_at, AT_FDCWD, 0, 0));
  report("name_to_handle_at", syscall(SYS_name_to_handle_at, AT_FDCWD, "/", 0, 0, 0));
  report("kexec_load", syscall(SYS_kexec_load, 0, 0, 0, 0));
  report("init_module", syscall(SYS_init_module, 0, 0, ""));
  report("personality_rie", syscall(SYS_personality, READ_IMPLIES_EXEC));
  report("mknod_char", syscall(SYS_mknod, "probe_chr", S_IFCHR | 0666, makedev(1, 3)));
  report("mknodat_block", syscall(SYS_mknodat, AT_FDCWD, "probe_blk", S_IFBLK | 0666, makedev(8, 0)));
  return 0;
}

// ptrace / process_vm_readv against a given pid (case 10).
static int trace(pid_t target) {
  char buf[16];
  struct iovec local = {buf, sizeof buf}, remote = {(void*)0x400000, sizeof buf};
  report("ptrace_attach", syscall(SYS_ptrace, PTRACE_ATTACH, target, 0, 0));
  report("ptrace_seize", syscall(SYS_ptrace, PTRACE_SEIZE, target, 0, 0));
  report("process_vm_readv", syscall(SYS_process_vm_readv, target, &local, 1, &remote, 1, 0));
  report("process_vm_writev", syscall(SYS_process_vm_writev, target, &local, 1, &remote, 1, 0));
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/mem", (int)target);
  int fd = open(path, O_RDONLY);
  report("open_proc_mem", fd);
  if (fd >= 0) {
    long n = pread(fd, buf, sizeof buf, 0x400000);
    report("read_proc_mem", n);
  }
  return 0;
}

// Terminal injection (case 12): TIOCSTI into stdin/stdout/stderr and /dev/tty, TIOCLINUX.
static int tty(const char* text) {
  int fds[4] = {0, 1, 2, open("/dev/tty", O_RDWR | O_NOCTTY)};
  report("open_dev_tty", fds[3]);
  for (int i = 0; i < 4; i++) {
    if (fds[i] < 0) continue;
    char name[32];
    snprintf(name, sizeof name, "tiocsti_fd%d", i == 3 ? 99 : i);
    long rc = 0;
    for (const char* p = text; *p; p++) {
      rc = ioctl(fds[i], TIOCSTI, p);
      if (rc < 0) break;
    }
    report(name, rc);
    // The same through the raw syscall with high bits set in the request (the filter must
    // compare the low 32 bits).
    snprintf(name, sizeof name, "tiocsti_high_fd%d", i == 3 ? 99 : i);
    char c = '\n';
    report(name, syscall(SYS_ioctl, fds[i], 0x100000000UL | TIOCSTI, &c));
    char sub = 2;  // TIOCL_SETSEL-ish selector byte; any TIOCLINUX must fail
    snprintf(name, sizeof name, "tioclinux_fd%d", i == 3 ? 99 : i);
    report(name, ioctl(fds[i], TIOCLINUX, &sub));
  }
  return 0;
}

// Forks children that just wait, until fork fails or `max` is reached (case 17). A bounded bomb:
// it cannot hurt a host where the limit is not enforced beyond `max` sleeping processes.
static int forks(long max) {
  long made = 0;
  int err = 0;
  for (; made < max; made++) {
    pid_t p = fork();
    if (p < 0) {
      err = errno;
      break;
    }
    if (p == 0) {
      pause();
      _exit(0);
    }
  }
  printf("forked %ld errno %d\n", made, err);
  fflush(stdout);
  signal(SIGTERM, SIG_IGN);
  kill(0, SIGTERM);  // our process group: the children (default action) but not us
  while (wait(NULL) > 0) {
  }
  return err ? 3 : 0;
}

// Touches memory 1 MiB at a time up to `max_mb` (case 18): bounded for the same reason.
static int mem(long max_mb) {
  long mb = 0;
  for (; mb < max_mb; mb++) {
    char* p = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      printf("mmap failed after %ld MiB errno %d\n", mb, errno);
      return 3;
    }
    memset(p, 0x5a, 1 << 20);
    if (mb % 32 == 0) {
      printf("allocated %ld MiB\n", mb);
      fflush(stdout);
    }
  }
  printf("survived %ld MiB\n", mb);
  return 0;
}

// Opens /dev/null until it fails (case 22).
static int fds(void) {
  long n = 0;
  int err = 0;
  for (;;) {
    int fd = open("/dev/null", O_RDONLY);
    if (fd < 0) {
      err = errno;
      break;
    }
    if (++n > 10000000) break;
  }
  printf("opened %ld errno %d\n", n, err);
  return 0;
}

static int ids(void) {
  printf("uid %d euid %d gid %d egid %d\n", (int)getuid(), (int)geteuid(), (int)getgid(), (int)getegid());
  return 0;
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "syscalls";
  if (!strcmp(mode, "syscalls")) return syscalls();
  if (!strcmp(mode, "trace") && argc > 2) return trace((pid_t)atoi(argv[2]));
  if (!strcmp(mode, "tty")) return tty(argc > 2 ? argv[2] : "echo INJECTED\n");
  if (!strcmp(mode, "forks")) return forks(argc > 2 ? atol(argv[2]) : 2000);
  if (!strcmp(mode, "mem")) return mem(argc > 2 ? atol(argv[2]) : 1024);
  if (!strcmp(mode, "fds")) return fds();
  if (!strcmp(mode, "ids")) return ids();
  if (!strcmp(mode, "x32")) {
    long rc = syscall(0x40000000 | SYS_getpid);  // x32 ABI: must be killed (SIGSYS)
    report("x32_getpid", rc);
    return 0;
  }
  if (!strcmp(mode, "int80")) {
    long rc;
    __asm__ volatile("int $0x80" : "=a"(rc) : "a"(20) : "memory");  // i386 getpid
    printf("int80_getpid %ld 0\n", rc);
    return 0;
  }
  fprintf(stderr, "unknown mode %s\n", mode);
  return 2;
}
