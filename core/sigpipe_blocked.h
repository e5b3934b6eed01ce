// Writing to a closed pipe or socket raises SIGPIPE unless the call can say MSG_NOSIGNAL, and
// splice(2) and write(2) cannot. `kiln run`, `kiln verify` and the unit tests keep SIGPIPE's
// default (kill), so a peer that goes away mid-write would take the whole process with it. While a
// SigpipeBlocked lives, SIGPIPE is blocked for this thread; one raised meanwhile is taken back
// before the old mask returns, so the write fails with EPIPE and nothing else happens.
#pragma once

#include <pthread.h>
#include <signal.h>
#include <time.h>

namespace kiln {

class SigpipeBlocked {
 public:
  SigpipeBlocked() {
    sigemptyset(&pipe_only_);
    sigaddset(&pipe_only_, SIGPIPE);
    ::pthread_sigmask(SIG_BLOCK, &pipe_only_, &old_);
  }
  ~SigpipeBlocked() {
    // Only when it was not blocked before: then nothing was pending when we blocked it, and
    // whatever is pending now was raised by our own writes.
    if (!sigismember(&old_, SIGPIPE)) {
      const timespec zero{};
      while (::sigtimedwait(&pipe_only_, nullptr, &zero) > 0) {
      }
    }
    ::pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  SigpipeBlocked(const SigpipeBlocked&) = delete;
  SigpipeBlocked& operator=(const SigpipeBlocked&) = delete;

 private:
  sigset_t pipe_only_{}, old_{};
};

}  // namespace kiln
