// One small process per exec that forks the command and becomes its subreaper: orphans of that
// exec (double fork, setsid) reparent to it instead of pid 1, so "kill this exec" can find them all.
#pragma once

#include <cstdint>

#include "sandbox/helper/exec_request.h"
#include "sandbox/helper/sandbox_context.h"

namespace kiln::helper {

// `forked` comes from the command's own process before anything of it runs, so pid 1 knows the
// command's pid even when the command kills its shepherd at once (`kill -9 -1`).
enum class ReportKind : std::uint32_t { started = 1, failed = 2, exited = 3, forked = 4 };

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

// Never returns: exits once the command and every process it left behind are gone.
[[noreturn]] void run_shepherd(const ExecRequest& req, const SandboxContext& ctx, int report_fd);

}  // namespace kiln::helper
