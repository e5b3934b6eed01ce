// pid 1's loop after setup: serve the control channel, reap every process that reaches pid 1, and
// take the whole sandbox down when kiln goes away.
#pragma once

#include "sandbox/helper/sandbox_context.h"

namespace kiln::helper {

[[noreturn]] void run_supervisor(const SandboxContext& ctx, int control_fd);

}  // namespace kiln::helper
