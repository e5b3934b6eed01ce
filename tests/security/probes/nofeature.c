// nofeature [--no-userns] [--no-seccomp] [--no-landlock] -- CMD ARGS...
// Runs CMD as if this kernel lacked a feature, without touching the host: a seccomp filter on this
// process (inherited by everything it starts) makes the feature's syscalls fail the way a kernel
// without it does. Used by case 27 (fail closed) to start `kiln` on a "host" without user
// namespaces, seccomp or Landlock.
//   --no-userns   unshare/clone with CLONE_NEWUSER -> EPERM (as with user namespaces disabled),
//                 clone3 -> ENOSYS (libc falls back to clone, whose flags the filter can read)
//   --no-seccomp  seccomp() -> ENOSYS, prctl(PR_SET_SECCOMP) -> EINVAL (CONFIG_SECCOMP off)
//   --no-landlock landlock_* -> ENOSYS (CONFIG_SECURITY_LANDLOCK off)
#define _GNU_SOURCE
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#define SYS_landlock_add_rule 445
#define SYS_landlock_restrict_self 446
#endif

#define LD_NR BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr))
#define LD_ARG0_LO BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0]))
#define RET(v) BPF_STMT(BPF_RET | BPF_K, (v))
#define ERRNO(e) RET(SECCOMP_RET_ERRNO | ((e) & SECCOMP_RET_DATA))

int main(int argc, char** argv) {
  int no_userns = 0, no_seccomp = 0, no_landlock = 0, i = 1;
  for (; i < argc; i++) {
    if (!strcmp(argv[i], "--no-userns")) no_userns = 1;
    else if (!strcmp(argv[i], "--no-seccomp")) no_seccomp = 1;
    else if (!strcmp(argv[i], "--no-landlock")) no_landlock = 1;
    else if (!strcmp(argv[i], "--")) { i++; break; }
    else break;
  }
  if (i >= argc) {
    fprintf(stderr, "usage: nofeature [--no-userns] [--no-seccomp] [--no-landlock] -- CMD...\n");
    return 2;
  }
  struct sock_filter f[64];
  int n = 0;
  f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch));
  f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0);
  f[n++] = (struct sock_filter)RET(SECCOMP_RET_ALLOW);
  f[n++] = (struct sock_filter)LD_NR;
  if (no_userns) {
    // unshare(flags) / clone(flags, ...): EPERM when CLONE_NEWUSER is set.
    f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_unshare, 1, 0);
    f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_clone, 0, 4);
    f[n++] = (struct sock_filter)LD_ARG0_LO;
    f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, CLONE_NEWUSER, 0, 1);
    f[n++] = (struct sock_filter)ERRNO(EPERM);
    f[n++] = (struct sock_filter)RET(SECCOMP_RET_ALLOW);
    f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_clone3, 0, 1);
    f[n++] = (struct sock_filter)ERRNO(ENOSYS);
  }
  if (no_seccomp) {
    f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_seccomp, 0, 1);
    f[n++] = (struct sock_filter)ERRNO(ENOSYS);
    f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_prctl, 0, 4);
    f[n++] = (struct sock_filter)LD_ARG0_LO;
    f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, PR_SET_SECCOMP, 0, 1);
    f[n++] = (struct sock_filter)ERRNO(EINVAL);
    f[n++] = (struct sock_filter)RET(SECCOMP_RET_ALLOW);
  }
  if (no_landlock) {
    f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_landlock_create_ruleset, 2, 0);
    f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_landlock_add_rule, 1, 0);
    f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_landlock_restrict_self, 0, 1);
    f[n++] = (struct sock_filter)ERRNO(ENOSYS);
  }
  f[n++] = (struct sock_filter)RET(SECCOMP_RET_ALLOW);
  struct sock_fprog prog = {(unsigned short)n, f};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
    perror("nofeature: installing the filter");
    return 2;
  }
  execvp(argv[i], argv + i);
  perror("nofeature: exec");
  return 127;
}
