// pid 1 of the sandbox: finishes the setup steps that need the new pid and mount namespaces, then
// becomes the supervisor.
#pragma once

#include "sandbox/helper/spec.h"
#include "sandbox/helper/status.h"

namespace kiln::helper {

// `alive_fd` is the read end of a pipe whose write end only the outer process holds: if it is
// already at EOF, the outer died before PR_SET_PDEATHSIG took effect.
[[noreturn]] void run_init(const Spec& spec, Status& status, int control_fd, int alive_fd);

}  // namespace kiln::helper
