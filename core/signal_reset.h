// Every signal disposition back to the default, through the raw rt_sigaction syscall. glibc's
// signal() and sigaction() refuse signals 32 and 33 (its own SIGCANCEL and SIGSETXID) with EINVAL,
// so a reset loop written with them leaves those two ignored when whoever started the process
// ignored them, and an ignored disposition survives execve into every command. No allocation:
// usable between fork (or vfork) and exec.
#pragma once

#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace kiln {

inline void reset_all_signal_dispositions() {
  struct {
    void (*handler)(int);
    unsigned long flags;
    void (*restorer)();
    unsigned long mask;
  } dfl{SIG_DFL, 0, nullptr, 0};
  for (int sig = 1; sig <= 64; ++sig)
    if (sig != SIGKILL && sig != SIGSTOP) ::syscall(SYS_rt_sigaction, sig, &dfl, nullptr, 8);
}

}  // namespace kiln
