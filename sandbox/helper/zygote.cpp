// The zygote's loop. It keeps no state between requests: each request is three descriptors and a
// fixed word, handled and closed before the next is read, so a child forked for one sandbox holds
// nothing of another's (the spec itself is read by the child, never by the zygote).
#include "sandbox/helper/zygote.h"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <string>
#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sandbox/helper/control.h"
#include "sandbox/helper/fd_util.h"
#include "sandbox/helper/signals.h"

namespace kiln::helper {

namespace {

constexpr char kRequest[] = "spawn";

// The reply: the child's pid in text with its pidfd attached (taken over and closed once sent), or
// "error". kiln holds the child by the pidfd only (the zygote reaps its children at once, so their
// pids may be reused).
bool reply(int fd, pid_t pid, int pidfd) {
  ControlOut out(fd);
  if (pid > 0 && pidfd >= 0) out.send_fd(std::to_string(pid), pidfd);
  else out.send(pid > 0 ? std::to_string(pid) : "error");
  while (out.pending()) {
    if (!out.flush()) return false;
    pollfd p{fd, POLLOUT, 0};
    if (out.pending() && ::poll(&p, 1, -1) < 0 && errno != EINTR) return false;
  }
  return true;
}

}  // namespace

HelperFds run_zygote(int fd) {
  // Die with kiln (the thread that started us lives as long as kiln's sandbox manager); a child
  // dies with us in turn, by the death signal main() arms in it.
  pid_t parent = ::getppid();
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0 || ::getppid() != parent) ::_exit(125);
  ::prctl(PR_SET_NAME, "kiln-zygote", 0, 0, 0);
  ignore_helper_signals();
  // Children are reaped by the kernel at exit: kiln waits on their pidfds, not on us.
  struct sigaction sa {};
  sa.sa_handler = SIG_DFL;
  sa.sa_flags = SA_NOCLDWAIT;
  ::sigaction(SIGCHLD, &sa, nullptr);
  for (int f = 0; f < 3; ++f)
    if (::fcntl(f, F_GETFD) < 0) ::open("/dev/null", O_RDWR);
  close_fds_except(&fd, 1);
  set_cloexec(fd, true);
  int sock_type = 0;
  socklen_t sock_len = sizeof sock_type;
  if (::getsockopt(fd, SOL_SOCKET, SO_TYPE, &sock_type, &sock_len) != 0 || sock_type != SOCK_SEQPACKET) ::_exit(125);
  // Ready: kiln uses the zygote only once it has said so (an older helper without --zygote exits
  // on the unknown argument instead, and kiln goes on exec'ing one helper per sandbox).
  if (!reply(fd, ::getpid(), -1)) ::_exit(0);

  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, -1) < 0 && errno != EINTR) ::_exit(1);
    ControlMessage msg;
    RecvResult r = recv_control(fd, msg);
    if (r == RecvResult::again) continue;
    if (r != RecvResult::ok) ::_exit(0);  // kiln closed its end (or is gone)
    const bool well_formed = msg.fds.size() == 3 && !msg.fds_truncated && msg.data == kRequest;
    if (!well_formed) {
      for (int f : msg.fds) ::close(f);
      if (!reply(fd, -1, -1)) ::_exit(0);
      continue;
    }
    const int fds[3] = {msg.fds[0], msg.fds[1], msg.fds[2]};
    const pid_t zygote = ::getpid();
    pid_t pid = ::fork();
    if (pid == 0) {
      // A death signal is not inherited: armed at once, and if the zygote died before that (the
      // child was handed to init already), this child must not go on unwatched.
      if (::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0 || ::getppid() != zygote) ::_exit(125);
      ::close(fd);
      // The child starts as kiln-sandbox would after execve: default SIGCHLD (its outer waits for
      // pid 1), no mask, the helper's own ignored signals (main() sets them again).
      struct sigaction dfl {};
      dfl.sa_handler = SIG_DFL;
      ::sigaction(SIGCHLD, &dfl, nullptr);
      sigset_t none;
      sigemptyset(&none);
      ::sigprocmask(SIG_SETMASK, &none, nullptr);
      ::prctl(PR_SET_NAME, "kiln-sandbox", 0, 0, 0);
      for (int i = 0; i < 3; ++i) set_cloexec(fds[i], false);
      return HelperFds{fds[0], fds[1], fds[2]};
    }
    for (int i = 0; i < 3; ++i) ::close(fds[i]);
    // Without a pidfd kiln could not hold the child safely (a pid may be reused once reaped), so
    // it gets "error" and closes its ends; the child, blocked on the spec kiln never writes, then
    // reads the end of it and exits. No kill by pid: with ESRCH the pid may already be another's.
    int pidfd = pid > 0 ? int(::syscall(SYS_pidfd_open, pid, 0)) : -1;
    if (pidfd < 0) pid = -1;
    if (!reply(fd, pid, pidfd)) ::_exit(0);
  }
}

}  // namespace kiln::helper
