// The zygote's loop. It keeps no state between requests: each request is three descriptors and a
// fixed word, handled and closed before the next is read, so a child forked for one sandbox holds
// nothing of another's (the spec itself is read by the child, never by the zygote).
#include "sandbox/helper/zygote.h"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sandbox/helper/fd_util.h"
#include "sandbox/helper/signals.h"

namespace kiln::helper {

namespace {

constexpr char kRequest[] = "spawn";

// The reply: the child's pid in text, and its pidfd attached. kiln holds the child by the pidfd
// only (the zygote reaps its children at once, so their pids may be reused).
bool reply(int fd, pid_t pid, int pidfd) {
  char text[32];
  int len = 0;
  {
    char digits[16];
    int n = 0;
    unsigned v = pid > 0 ? unsigned(pid) : 0;
    do digits[n++] = char('0' + v % 10), v /= 10;
    while (v != 0 && n < 16);
    if (pid <= 0) {
      std::memcpy(text, "error", 5);
      len = 5;
    } else {
      while (n > 0) text[len++] = digits[--n];
    }
  }
  iovec iov{text, std::size_t(len)};
  msghdr mh{};
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  alignas(cmsghdr) char cbuf[CMSG_SPACE(sizeof(int))];
  if (pidfd >= 0) {
    std::memset(cbuf, 0, sizeof cbuf);
    mh.msg_control = cbuf;
    mh.msg_controllen = sizeof cbuf;
    cmsghdr* c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &pidfd, sizeof pidfd);
  }
  for (;;) {
    ssize_t n = ::sendmsg(fd, &mh, MSG_NOSIGNAL);
    if (n == len) return true;
    if (n < 0 && errno == EINTR) continue;
    return false;
  }
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
    char buf[64];
    iovec iov{buf, sizeof buf};
    alignas(cmsghdr) char cbuf[CMSG_SPACE(sizeof(int) * 4)];
    msghdr mh{};
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = cbuf;
    mh.msg_controllen = sizeof cbuf;
    ssize_t n = ::recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) ::_exit(0);  // kiln closed its end (or is gone)
    int fds[4];
    int nfds = 0;
    for (cmsghdr* c = CMSG_FIRSTHDR(&mh); c != nullptr; c = CMSG_NXTHDR(&mh, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      std::size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (std::size_t i = 0; i < count; ++i) {
        int f;
        std::memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof f);
        if (nfds < 4) fds[nfds++] = f;
        else ::close(f);
      }
    }
    const bool well_formed = nfds == 3 && (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) == 0 &&
                             std::size_t(n) == sizeof kRequest - 1 && std::memcmp(buf, kRequest, n) == 0;
    if (!well_formed) {
      for (int i = 0; i < nfds; ++i) ::close(fds[i]);
      if (!reply(fd, -1, -1)) ::_exit(0);
      continue;
    }
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
    bool sent = reply(fd, pid, pidfd);
    if (pidfd >= 0) ::close(pidfd);
    if (!sent) ::_exit(0);
  }
}

}  // namespace kiln::helper
