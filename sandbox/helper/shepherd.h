// One small process per exec that forks the command and becomes its subreaper: orphans of that
// exec (double fork, setsid) reparent to it instead of pid 1, so "kill this exec" can find them all.
#pragma once

#include <cstdint>

#include "sandbox/helper/exec_request.h"
#include "sandbox/helper/sandbox_context.h"

namespace kiln::helper {

// `forked` comes from the command's own process before anything of it runs, so pid 1 knows the
// command's pid even when the command kills its shepherd at once (`kill -9 -1`). `taken` is a
// spare's first word once it holds its request, before it starts anything: a spare that dies
// without it never ran the command, so pid 1 may give the request to another shepherd.
enum class ReportKind : std::uint32_t { started = 1, failed = 2, exited = 3, forked = 4, taken = 5 };

// Fixed-size and under PIPE_BUF, so each write to the report pipe arrives whole.
struct ShepherdReport {
  ReportKind kind;
  std::int32_t pid;
  std::int32_t err;
  std::int32_t wait_status;
  std::int64_t user_us;
  std::int64_t sys_us;
  std::int64_t maxrss_kb;
  char step[16];
  char message[232];
};

// The shepherd confines itself as the command will be, so the command inherits it: every
// capability dropped (bounding, ambient, securebits locked), PR_SET_NO_NEW_PRIVS, the sandbox's
// seccomp filter. A spare does this before its request arrives, which takes some hundred
// syscalls and the filter's compile into the kernel (BPF JIT) off the exec's path. The shepherd
// needs no privilege and nothing the filter refuses (pid 1 does the killing). False with errno set.
bool confine_shepherd(const SandboxContext& ctx);

// Never returns: exits once the command and every process it left behind are gone. `confined`:
// confine_shepherd already succeeded in this process.
[[noreturn]] void run_shepherd(const ExecRequest& req, const SandboxContext& ctx, int report_fd, bool confined);

// A shepherd forked ahead of time, so an exec does not wait for pid 1's fork: it blocks on
// `job_fd` for one exec request (the same JSON and fds pid 1 received, already validated there)
// and then runs it as run_shepherd does. Exits if pid 1 closes `job_fd` first.
[[noreturn]] void run_spare_shepherd(const SandboxContext& ctx, int job_fd, int report_fd);

}  // namespace kiln::helper
