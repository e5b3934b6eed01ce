// fork/exec for the helper and plain children. Not Boost.Process v2: in Boost 1.81 (the headers
// here) posix::bind_fd::on_setup falls off the end of a non-void function (undefined behaviour;
// fixed in 1.82) and the Linux close_all compares whitelist[idx] with itself, so descriptors
// between the whitelisted ones are never closed and server fds (other runs' pipe ends) would
// leak into the helper; it also forks the whole multithreaded server and runs
// io_context::notify_fork in the child. This file is the small, auditable replacement: vfork,
// dup2 into place, close_range everything else, exec, errno back over a CLOEXEC pipe.
#include "sandbox/spawn.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "core/fd_io.h"
#include "core/signal_reset.h"

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

namespace kiln::sandbox {

namespace {

struct ChildPlan {
  const char* path;
  char* const* argv;
  char* const* envp;
  const std::pair<int, int>* fds;
  std::size_t nfds;
  const char* cwd;
  bool setsid;
  bool pdeathsig;
  const std::pair<int, rlim_t>* rlimits;
  std::size_t nrlimits;
  const int* cgroup_fds;
  std::size_t ncgroup;
  int err_fd;
};

// Runs in the vfork child: only async-signal-safe calls, no allocation, no return.
[[noreturn]] __attribute__((noinline)) void child_main(const ChildPlan* p) {
  int err = 0;
  auto die = [&](int e) {
    ssize_t ignored = ::write(p->err_fd, &e, sizeof e);
    (void)ignored;
    ::_exit(127);
  };
  // Reset signal dispositions and mask the server may have changed (it blocks signals for
  // its sigwait thread); a child must start with a clean slate.
  sigset_t none;
  sigemptyset(&none);
  // Through the raw syscall: glibc's signal() cannot reset 32 and 33 (core/signal_reset.h).
  reset_all_signal_dispositions();
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  for (std::size_t i = 0; i < p->ncgroup; ++i)
    if (::write(p->cgroup_fds[i], "0", 1) != 1) die(errno);
  if (p->pdeathsig && ::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) die(errno);
  if (p->setsid && ::setsid() < 0) die(errno);
  // Move sources above every target first so a dup2 cannot clobber a source still needed.
  int moved[16];
  if (p->nfds > 16) die(EINVAL);
  for (std::size_t i = 0; i < p->nfds; ++i) {
    moved[i] = ::fcntl(p->fds[i].second, F_DUPFD_CLOEXEC, 64);
    if (moved[i] < 0) die(errno);
  }
  for (std::size_t i = 0; i < p->nfds; ++i)
    if (::dup2(moved[i], p->fds[i].first) < 0) die(errno);
  int highest = 2;
  for (std::size_t i = 0; i < p->nfds; ++i) highest = p->fds[i].first > highest ? p->fds[i].first : highest;
  // Everything above the targets goes (except the error pipe, which is CLOEXEC).
  if (::syscall(SYS_close_range, unsigned(highest + 1), ~0U, CLOSE_RANGE_CLOEXEC) != 0) {
    for (int fd = highest + 1; fd < 65536; ++fd)
      if (fd != p->err_fd) ::fcntl(fd, F_SETFD, FD_CLOEXEC);
  }
  for (std::size_t i = 0; i < p->nrlimits; ++i) {
    struct rlimit rl {p->rlimits[i].second, p->rlimits[i].second};
    if (::setrlimit(p->rlimits[i].first, &rl) != 0) die(errno);
  }
  if (p->cwd && ::chdir(p->cwd) != 0) die(errno);
  ::execve(p->path, p->argv, p->envp);
  err = errno;
  die(err);
  ::_exit(127);
}

}  // namespace

Result<pid_t> spawn_process(const SpawnSpec& spec) {
  std::vector<char*> argv, envp;
  for (const auto& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const auto& e : spec.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  int errpipe[2];
  if (::pipe2(errpipe, O_CLOEXEC) != 0) return fail(Errc::io, fmt::format("pipe: {}", std::strerror(errno)));
  ChildPlan plan{spec.path.c_str(),
                 argv.data(),
                 envp.data(),
                 spec.fds.data(),
                 spec.fds.size(),
                 spec.cwd.empty() ? nullptr : spec.cwd.c_str(),
                 spec.setsid,
                 spec.pdeathsig,
                 spec.rlimits.data(),
                 spec.rlimits.size(),
                 spec.cgroup_procs_fds.data(),
                 spec.cgroup_procs_fds.size(),
                 errpipe[1]};
  pid_t pid = ::vfork();
  if (pid == 0) child_main(&plan);
  int fork_err = errno;
  ::close(errpipe[1]);
  if (pid < 0) {
    ::close(errpipe[0]);
    return fail(Errc::io, fmt::format("cannot start {}: {}", spec.path, std::strerror(fork_err)));
  }
  int child_err = 0;
  ssize_t n = read_some(errpipe[0], &child_err, sizeof child_err);
  ::close(errpipe[0]);
  if (n == ssize_t(sizeof child_err)) {
    int status;
    ::waitpid(pid, &status, 0);
    return fail(child_err == ENOENT || child_err == EACCES ? Errc::not_found : Errc::io,
                fmt::format("cannot start {}: {}", spec.path, std::strerror(child_err)));
  }
  return pid;
}

int open_pidfd(pid_t pid) {
#ifdef SYS_pidfd_open
  return int(::syscall(SYS_pidfd_open, pid, 0));
#else
  (void)pid;
  return -1;
#endif
}

}  // namespace kiln::sandbox
