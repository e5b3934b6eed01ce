// The shepherd blocks in wait4, which pid 1 must never do; it reports the command's own exit and
// rusage at once, then lingers only while background processes of the exec are alive.
#include "sandbox/helper/shepherd.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandbox/helper/caps.h"
#include "sandbox/helper/control.h"
#include "sandbox/helper/exec_child.h"
#include "sandbox/helper/fd_util.h"
#include "sandbox/helper/seccomp_filter.h"

namespace kiln::helper {

namespace {

struct ChildStart {
  const ExecRequest* req;
  const SandboxContext* ctx;
  int report_fd;
  int err_fd;
  int err_read_fd;
};

int exec_child_entry(void* arg) {
  const auto& s = *static_cast<const ChildStart*>(arg);
  ::close(s.err_read_fd);
  ShepherdReport forked{};
  forked.kind = ReportKind::forked;
  forked.pid = ::getpid();
  write_all(s.report_fd, &forked, sizeof forked);
  run_exec_child(*s.req, *s.ctx, s.err_fd);
}

// The command's process shares the shepherd's memory until its execve (as posix_spawn does), so
// starting it copies no page tables and takes no copy-on-write faults: a fork of the shepherd was
// a sixth of the helper's part of a short exec. Only the memory is shared; descriptors, signal
// state, credentials and limits are the child's own, so every step of run_exec_child still
// applies to it alone. The shepherd is suspended until the execve (or the child's exit) and
// installs no signal handlers that could run on the child's side. The child runs on a stack of
// its own (execvpe puts a copy of argv on it when it falls back to /bin/sh).
pid_t start_exec_child(ChildStart& start) {
#if defined(__SANITIZE_ADDRESS__)
  // AddressSanitizer keeps per-thread state (fake stack frames, shadow memory of the stack) that a
  // child sharing this memory would change under the shepherd's feet: sanitizer builds fork.
  pid_t forked = ::fork();
  if (forked == 0) ::_exit(exec_child_entry(&start));
  return forked;
#else
  const std::size_t page = 4096;
  const std::size_t want = 64 * 1024 + (start.req->argv_ptrs.size() + 2) * sizeof(char*) + 4096;
  const std::size_t size = (want + page - 1) / page * page;
  void* stack = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (stack == MAP_FAILED) return -1;
  pid_t pid = ::clone(exec_child_entry, static_cast<char*>(stack) + size, CLONE_VM | CLONE_VFORK | SIGCHLD, &start);
  const int saved = errno;
  ::munmap(stack, size);
  errno = saved;
  return pid;
#endif
}

}  // namespace

bool confine_shepherd(const SandboxContext& ctx) {
  if (!drop_all_capabilities()) return false;
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return false;
  return seccomp_enforce(ctx.seccomp);
}

namespace {

[[noreturn]] void report_confine_failed(int report_fd, int err) {
  ShepherdReport rep{};
  rep.kind = ReportKind::failed;
  rep.err = err;
  std::strncpy(rep.step, "confine", sizeof rep.step - 1);
  std::snprintf(rep.message, sizeof rep.message, "dropping capabilities or loading the seccomp filter: %s",
                std::strerror(err));
  write_all(report_fd, &rep, sizeof rep);
  ::_exit(1);
}

}  // namespace

void run_shepherd(const ExecRequest& req, const SandboxContext& ctx, int report_fd, bool confined) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
  ::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
  ::prctl(PR_SET_NAME, "kiln-exec", 0, 0, 0);
  const int keep[] = {report_fd, req.stdio[0], req.stdio[1], req.stdio[2], req.cgroup_fd, ctx.landlock.fd};
  close_fds_except(keep, 6);

  ShepherdReport rep{};
  if (!confined && !confine_shepherd(ctx)) report_confine_failed(report_fd, errno);
  int errp[2];
  if (::pipe2(errp, O_CLOEXEC) != 0) {
    rep.kind = ReportKind::failed;
    rep.err = errno;
    std::strncpy(rep.step, "fork", sizeof rep.step - 1);
    std::strncpy(rep.message, "pipe2 for the exec child failed", sizeof rep.message - 1);
    write_all(report_fd, &rep, sizeof rep);
    ::_exit(1);
  }
  ChildStart start{&req, &ctx, report_fd, errp[1], errp[0]};
  pid_t child = start_exec_child(start);
  int fork_errno = errno;
  ::close(errp[1]);
  for (int f : req.stdio)
    if (f >= 0) ::close(f);
  if (req.cgroup_fd >= 0) ::close(req.cgroup_fd);
  if (ctx.landlock.fd >= 0) ::close(ctx.landlock.fd);
  if (child < 0) {
    rep.kind = ReportKind::failed;
    rep.err = fork_errno;
    std::strncpy(rep.step, "fork", sizeof rep.step - 1);
    std::snprintf(rep.message, sizeof rep.message, "fork: %s", std::strerror(fork_errno));
    write_all(report_fd, &rep, sizeof rep);
    ::_exit(1);
  }

  ChildError ce{};
  ssize_t n = read_some(errp[0], &ce, sizeof ce);
  ::close(errp[0]);
  bool failed = n == static_cast<ssize_t>(sizeof ce);
  if (failed) {
    rep.kind = ReportKind::failed;
    rep.pid = child;
    rep.err = ce.err;
    std::memcpy(rep.step, ce.step, sizeof rep.step);
    std::memcpy(rep.message, ce.message, sizeof rep.message);
    rep.step[sizeof rep.step - 1] = '\0';
    rep.message[sizeof rep.message - 1] = '\0';
  } else {
    rep.kind = ReportKind::started;
    rep.pid = child;
  }
  write_all(report_fd, &rep, sizeof rep);

  for (;;) {
    // Look before reaping: a command that runs `kill -9 -1` has this process killed and then
    // exits itself. If the kill is still pending when the command becomes a zombie, wait4 would
    // reap it inside the syscall and the fatal signal would end us before the report is written:
    // the status would be lost. Returning from the peek instead lets the kill land first, and
    // the zombie passes to pid 1, which reaps and reports it.
    siginfo_t peek{};
    if (::waitid(P_ALL, 0, &peek, WEXITED | WNOWAIT) != 0) {
      if (errno == EINTR) continue;
      break;  // ECHILD: the exec and everything it left behind are gone
    }
    int status = 0;
    struct rusage ru {};
    pid_t r = ::wait4(peek.si_pid, &status, 0, &ru);
    if (r < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (r == child && !failed) {
      ShepherdReport ex{};
      ex.kind = ReportKind::exited;
      ex.pid = child;
      ex.wait_status = status;
      ex.user_us = static_cast<std::int64_t>(ru.ru_utime.tv_sec) * 1000000 + ru.ru_utime.tv_usec;
      ex.sys_us = static_cast<std::int64_t>(ru.ru_stime.tv_sec) * 1000000 + ru.ru_stime.tv_usec;
      ex.maxrss_kb = ru.ru_maxrss;
      write_all(report_fd, &ex, sizeof ex);
      // pid 1 is usually woken onto this CPU, where it would wait behind this process's exit (its
      // memory torn down) before it could pass the report on: let it run first.
      ::sched_yield();
    }
  }
  ::_exit(0);
}

void run_spare_shepherd(const SandboxContext& ctx, int job_fd, int report_fd) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
  if (::getppid() != 1) ::_exit(1);  // pid 1 died before the death signal was armed
  ::prctl(PR_SET_NAME, "kiln-spare", 0, 0, 0);
  const int keep[] = {job_fd, report_fd, ctx.landlock.fd};
  close_fds_except(keep, 3);
  // A spare that cannot confine itself still takes its request, only to report the failure for
  // it as a shepherd forked for the request would: the exec fails naming the step, nothing runs.
  // (It cannot just exit: a request may already be on its way to it.)
  const int confine_err = confine_shepherd(ctx) ? 0 : (errno ? errno : EPERM);
  ControlMessage msg;
  for (;;) {
    pollfd p{job_fd, POLLIN, 0};
    if (::poll(&p, 1, -1) < 0 && errno != EINTR) ::_exit(1);
    RecvResult r = recv_control(job_fd, msg);
    if (r == RecvResult::again) continue;
    if (r != RecvResult::ok) ::_exit(0);
    break;
  }
  ::close(job_fd);
  ShepherdReport taken{};
  taken.kind = ReportKind::taken;
  write_all(report_fd, &taken, sizeof taken);
  ExecRequest req;
  std::string err;
  bool ok = false;
  try {
    ok = parse_exec(nlohmann::json::parse(msg.data), ctx.spec->workspace, req, err);
  } catch (const std::exception&) {
    ok = false;
  }
  if (!ok || (msg.fds.size() != 3 && msg.fds.size() != 4)) ::_exit(1);  // pid 1 checked both already
  if (confine_err) report_confine_failed(report_fd, confine_err);
  for (int i = 0; i < 3; ++i) req.stdio[i] = msg.fds[static_cast<std::size_t>(i)];
  if (msg.fds.size() == 4) req.cgroup_fd = msg.fds[3];
  run_shepherd(req, ctx, report_fd, true);
}

}  // namespace kiln::helper
