// The seccomp filter (rules in sandbox/seccomp_gen/seccomp_rules.cpp, compiled to BPF at build
// time) and its loading with one prctl by each exec's shepherd.
#pragma once

#include <linux/filter.h>
#include <vector>

namespace kiln::helper {

struct SeccompProgram {
  std::vector<sock_filter> insns;  // empty: not enforced (disabled in the spec)
};

void load_seccomp_program(SeccompProgram& out);
// After PR_SET_NO_NEW_PRIVS. Returns false with errno set.
bool seccomp_enforce(const SeccompProgram& prog);

}  // namespace kiln::helper
