// sigwrap SIGS -- ARGV...: starts ARGV the way a careless or hostile parent would start kiln: each
// signal of the comma-separated list SIGS set to "ignore" through the raw rt_sigaction syscall
// (glibc's signal() refuses 32 and 33, a parent need not use glibc) and blocked. Ignored
// dispositions and the mask survive execve, so kiln, its helper and every command inherit them
// unless someone puts them back.
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

struct kernel_sigaction {
  void *handler;
  unsigned long flags;
  void *restorer;
  unsigned long mask;
};

int main(int argc, char **argv) {
  if (argc < 4 || strcmp(argv[2], "--") != 0) {
    fprintf(stderr, "usage: sigwrap 1,2,15,32 -- command...\n");
    return 2;
  }
  unsigned long block = 0;
  for (char *p = strtok(argv[1], ","); p; p = strtok(NULL, ",")) {
    int s = atoi(p);
    if (s < 1 || s > 64 || s == SIGKILL || s == SIGSTOP) continue;
    struct kernel_sigaction a = {SIG_IGN, 0, NULL, 0};
    if (syscall(SYS_rt_sigaction, s, &a, NULL, 8) != 0) {
      perror("rt_sigaction");
      return 2;
    }
    block |= 1UL << (s - 1);
  }
  if (syscall(SYS_rt_sigprocmask, SIG_BLOCK, &block, NULL, 8) != 0) {
    perror("rt_sigprocmask");
    return 2;
  }
  execvp(argv[3], argv + 3);
  perror(argv[3]);
  return 127;
}
