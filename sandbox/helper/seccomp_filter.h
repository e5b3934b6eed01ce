// The seccomp filter: compiled once with libseccomp into raw BPF in pid 1, then loaded by each exec
// child with one prctl (cheaper than seccomp_load's rebuild per exec).
#pragma once

#include <linux/filter.h>
#include <vector>

#include "sandbox/helper/step_error.h"

namespace kiln::helper {

struct SeccompProgram {
  std::vector<sock_filter> insns;  // empty: not enforced (disabled in the spec)
};

bool compile_seccomp(SeccompProgram& out, StepError& e);
// In the exec child, after PR_SET_NO_NEW_PRIVS. Returns false with errno set.
bool seccomp_enforce(const SeccompProgram& prog);

}  // namespace kiln::helper
