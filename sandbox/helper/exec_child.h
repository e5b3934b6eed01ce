// The child between its start and execve: the last steps that turn a copy of pid 1 into an unprivileged,
// filtered process running the requested command.
#pragma once

#include "sandbox/helper/exec_request.h"
#include "sandbox/helper/sandbox_context.h"

namespace kiln::helper {

// What the child writes to its error pipe when a step fails (execve success closes the pipe).
struct ChildError {
  int err;
  char step[16];
  char message[232];
};

[[noreturn]] void run_exec_child(const ExecRequest& req, const SandboxContext& ctx, int err_fd);

}  // namespace kiln::helper
