// Exec child, in the order HELPER_PROTOCOL.md lists. No allocation here: everything was prepared
// by the supervisor before the child started, and the child shares the shepherd's memory until
// its execve (shepherd.cpp), so it may only read it. Any failure is written to the error pipe and
// the child exits 127.
#include "sandbox/helper/exec_child.h"

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/cgroup_join.h"
#include "sandbox/helper/fd_util.h"
#include "sandbox/helper/signals.h"

extern char** environ;

namespace kiln::helper {

namespace {

[[noreturn]] void die(int err_fd, const char* step, int err, const char* what) {
  ChildError ce{};
  ce.err = err;
  std::snprintf(ce.step, sizeof ce.step, "%s", step);
  std::snprintf(ce.message, sizeof ce.message, "%s: %s", what, std::strerror(err));
  write_all(err_fd, &ce, sizeof ce);
  ::_exit(127);
}

}  // namespace

void run_exec_child(const ExecRequest& req, const SandboxContext& ctx, int err_fd) {
  // pid 1 blocks SIGCHLD and ignores a few signals; the command must start with the defaults. Of
  // the dispositions only "ignore" survives execve (handlers are reset by it), and the helper
  // ignores exactly kHelperIgnoredSignals.
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  for (int sig : kHelperIgnoredSignals) ::signal(sig, SIG_DFL);

  for (int i = 0; i < 3; ++i)
    if (::dup2(req.stdio[i], i) < 0) die(err_fd, "stdio", errno, "dup2");

  // This child is a single-threaded process of its own (it shares only memory with the shepherd,
  // not its thread group), so it can take the move
  // that skips the kernel's global lock (core/cgroup_join.h): the lock's RCU wait was most of an
  // idle session exec.
  if (req.cgroup_fd >= 0 && !join_cgroup_single_threaded(req.cgroup_fd))
    die(err_fd, "cgroup", errno, "joining the exec's cgroup");

  if (req.setsid) {
    if (::setsid() < 0) die(err_fd, "setsid", errno, "setsid");
  } else if (::setpgid(0, 0) != 0) {
    die(err_fd, "setsid", errno, "setpgid");
  }

  struct rlimit core {0, 0};
  ::setrlimit(RLIMIT_CORE, &core);
  for (const auto& l : req.rlimits) {
    struct rlimit cur {};
    ::getrlimit(l.resource, &cur);
    rlim_t v = l.value;
    if (cur.rlim_max != RLIM_INFINITY && v > cur.rlim_max) v = cur.rlim_max;  // raising needs init-ns caps
    struct rlimit nl {v, v};
    // CPU: SIGXCPU at the limit, SIGKILL a second later only if that is ignored. With equal soft and
    // hard limits the kernel sends SIGKILL at once, which cannot be told from any other kill -9, and
    // under load its tick-sampled CPU time runs ahead of what wait4 reports afterwards.
    if (l.resource == RLIMIT_CPU && (cur.rlim_max == RLIM_INFINITY || v < cur.rlim_max)) nl.rlim_max = v + 1;
    if (::setrlimit(l.resource, &nl) != 0) die(err_fd, "rlimits", errno, "setrlimit");
  }

  // Capabilities, no_new_privs and the seccomp filter are already in force: inherited from the
  // shepherd (confine_shepherd). Landlock comes last, after the cgroup join it would refuse.
  if (!landlock_enforce(ctx.landlock)) die(err_fd, "landlock", errno, "landlock_restrict_self");

  close_fds_except(&err_fd, 1);
  // HOME, as `mkdir -p` would make it, with the command's own rights (after Landlock and
  // seccomp); failures are the command's to notice, as with a shell that tried.
  if (!req.home.empty()) {
    char path[4096];
    std::size_t n = req.home.size();
    std::memcpy(path, req.home.c_str(), n + 1);
    for (std::size_t i = 1; i <= n; ++i) {
      if (path[i] != '/' && path[i] != '\0') continue;
      char c = path[i];
      path[i] = '\0';
      ::mkdir(path, 0755);
      path[i] = c;
    }
  }
  if (::chdir(req.cwd.c_str()) != 0) die(err_fd, "cwd", errno, req.cwd.c_str());

  // execvpe looks PATH up in `environ`, which must be the command's, not the helper's.
  environ = const_cast<char**>(req.env_ptrs.data());
  ::execvpe(req.argv[0].c_str(), const_cast<char* const*>(req.argv_ptrs.data()),
            const_cast<char* const*>(req.env_ptrs.data()));
  die(err_fd, "exec", errno, req.argv[0].c_str());
}

}  // namespace kiln::helper
