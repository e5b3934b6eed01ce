// SigpipeBlocked: with SIGPIPE at its default (kill), a write to a closed pipe inside the guard
// fails with EPIPE, the process lives on, and no SIGPIPE is left pending for later; the thread's
// mask is what it was before.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>

#include "core/fd_io.h"
#include "core/sigpipe_blocked.h"
#include "core/unique_fd.h"

namespace {

bool sigpipe_pending() {
  sigset_t pending;
  sigpending(&pending);
  return sigismember(&pending, SIGPIPE);
}

bool sigpipe_blocked_now() {
  sigset_t mask;
  pthread_sigmask(SIG_BLOCK, nullptr, &mask);
  return sigismember(&mask, SIGPIPE);
}

}  // namespace

TEST_CASE("SigpipeBlocked: a write to a closed pipe fails with EPIPE and raises nothing") {
  struct sigaction dfl {}, old {};
  dfl.sa_handler = SIG_DFL;
  REQUIRE(::sigaction(SIGPIPE, &dfl, &old) == 0);
  REQUIRE_FALSE(sigpipe_blocked_now());
  int p[2];
  REQUIRE(::pipe2(p, O_CLOEXEC) == 0);
  ::close(p[0]);
  kiln::UniqueFd wr(p[1]);
  int err = 0;
  {
    kiln::SigpipeBlocked guard;
    CHECK(sigpipe_blocked_now());
    errno = 0;
    CHECK_FALSE(kiln::write_all(wr.get(), std::string_view("lost")));
    err = errno;
    CHECK(sigpipe_pending());  // raised, held by the mask...
  }
  CHECK(err == EPIPE);
  CHECK_FALSE(sigpipe_pending());  // ...and taken back before the mask returned
  CHECK_FALSE(sigpipe_blocked_now());
  ::sigaction(SIGPIPE, &old, nullptr);
}

TEST_CASE("SigpipeBlocked: a thread that already blocked SIGPIPE keeps it blocked") {
  sigset_t pipe_only, old;
  sigemptyset(&pipe_only);
  sigaddset(&pipe_only, SIGPIPE);
  REQUIRE(pthread_sigmask(SIG_BLOCK, &pipe_only, &old) == 0);
  { kiln::SigpipeBlocked guard; }
  CHECK(sigpipe_blocked_now());
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}
