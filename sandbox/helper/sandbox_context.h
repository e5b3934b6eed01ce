// What pid 1 prepared once and every exec child applies: the Landlock ruleset and the BPF program.
#pragma once

#include "sandbox/helper/landlock.h"
#include "sandbox/helper/seccomp_filter.h"
#include "sandbox/helper/spec.h"

namespace kiln::helper {

struct SandboxContext {
  const Spec* spec = nullptr;
  LandlockRuleset landlock;
  SeccompProgram seccomp;
};

}  // namespace kiln::helper
