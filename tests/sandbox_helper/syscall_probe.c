// Tries each syscall the helper's seccomp filter must refuse and prints "name rc errno" per line;
// compiled on the host into the workspace by check_helper.py and run inside the sandbox.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static void report(const char* name, long rc) { printf("%s %ld %d\n", name, rc, rc < 0 ? errno : 0); }

int main(int argc, char** argv) {
  if (argc > 1 && strcmp(argv[1], "x32") == 0) {
    // getpid through the x32 ABI number space: must not run (killed by SIGSYS).
    long rc = syscall(0x40000000 | SYS_getpid);
    report("x32_getpid", rc);
    return 0;
  }
  if (argc > 1 && strcmp(argv[1], "int80") == 0) {
    long rc;
    // i386 getpid (20) through int 0x80: another ABI, must be killed.
    __asm__ volatile("int $0x80" : "=a"(rc) : "a"(20) : "memory");
    printf("int80_getpid %ld\n", rc);
    return 0;
  }
  if (argc > 1 && strcmp(argv[1], "ptrace_parent") == 0) {
    report("ptrace_attach_pid1", syscall(SYS_ptrace, PTRACE_ATTACH, 1, 0, 0));
    return 0;
  }
  report("ptrace_traceme", syscall(SYS_ptrace, PTRACE_TRACEME, 0, 0, 0));
  report("process_vm_readv", syscall(SYS_process_vm_readv, 1, 0, 0, 0, 0, 0));
  report("unshare_user", syscall(SYS_unshare, CLONE_NEWUSER));
  report("unshare_ns", syscall(SYS_unshare, CLONE_NEWNS));
  report("setns", syscall(SYS_setns, 0, 0));
  report("mount_tmpfs", syscall(SYS_mount, "none", "/tmp", "tmpfs", 0, 0));
  report("umount2", syscall(SYS_umount2, "/tmp", MNT_DETACH));
  report("pivot_root", syscall(SYS_pivot_root, "/tmp", "/tmp"));
  report("open_tree", syscall(SYS_open_tree, AT_FDCWD, "/tmp", 1));
  report("fsopen", syscall(SYS_fsopen, "tmpfs", 0));
  report("io_uring_setup", syscall(SYS_io_uring_setup, 8, (void*)0));
  report("bpf", syscall(SYS_bpf, 0, 0, 0));
  report("keyctl", syscall(SYS_keyctl, 0, 0, 0, 0, 0));
  report("add_key", syscall(SYS_add_key, "user", "x", "y", 1, -1));
  report("userfaultfd", syscall(SYS_userfaultfd, 0));
  report("perf_event_open", syscall(SYS_perf_event_open, 0, 0, -1, -1, 0));
  report("open_by_handle_at", syscall(SYS_open_by_handle_at, AT_FDCWD, 0, 0));
  report("name_to_handle_at", syscall(SYS_name_to_handle_at, AT_FDCWD, "/", 0, 0, 0));
  report("kexec_load", syscall(SYS_kexec_load, 0, 0, 0, 0));
  report("init_module", syscall(SYS_init_module, 0, 0, ""));
  report("syslog", syscall(SYS_syslog, 3, 0, 0));
  report("personality_rie", syscall(SYS_personality, READ_IMPLIES_EXEC));
  report("personality_norandom", syscall(SYS_personality, ADDR_NO_RANDOMIZE));
  report("personality_query_ok", syscall(SYS_personality, 0xffffffffUL));
  report("personality_linux_ok", syscall(SYS_personality, 0UL));
  // The rules test the 32 bits the kernel reads, one pair of neighbouring bits each: values that
  // differ from the two allowed ones in a single bit, in the top bit only, or only above bit 31.
  report("personality_linux32", syscall(SYS_personality, (unsigned long)PER_LINUX32));
  report("personality_top_bit", syscall(SYS_personality, 0x80000000UL));
  report("personality_all_but_one", syscall(SYS_personality, 0xfffffffeUL));
  report("personality_high_half_ok", syscall(SYS_personality, 0xdead0000ffffffffUL));
  report("mknod_char", syscall(SYS_mknod, "/tmp/probe_chr", S_IFCHR | 0600, makedev(1, 3)));
  report("mknodat_block", syscall(SYS_mknodat, AT_FDCWD, "/tmp/probe_blk", S_IFBLK | 0600, makedev(8, 0)));
  report("mknod_fifo_ok", syscall(SYS_mknod, "/tmp/probe_fifo", S_IFIFO | 0600, 0));
  report("clone3", syscall(SYS_clone3, 0, 0));
  report("clone_newuser", syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0));
  report("clone_newnet", syscall(SYS_clone, CLONE_NEWNET | SIGCHLD, 0, 0, 0, 0));
  char c = 'x';
  report("ioctl_tiocsti", syscall(SYS_ioctl, 0, TIOCSTI, &c));
  report("ioctl_tiocsti_high", syscall(SYS_ioctl, 0, 0x100000000UL | TIOCSTI, &c));
  report("ioctl_tioclinux", syscall(SYS_ioctl, 0, TIOCLINUX, &c));
  report("chroot", syscall(SYS_chroot, "/tmp"));
  long pid = fork();
  if (pid == 0) _exit(0);
  report("fork_ok", pid > 0 ? 0 : -1);
  waitpid((pid_t)pid, 0, 0);
  return 0;
}
