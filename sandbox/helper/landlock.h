// Landlock: a ruleset built once in pid 1 from what was actually mounted, then enforced by each exec
// child with landlock_restrict_self. A second wall behind the mounts, not a replacement for them.
#pragma once

#include "sandbox/helper/mounts.h"
#include "sandbox/helper/spec.h"
#include "sandbox/helper/step_error.h"

namespace kiln::helper {

struct LandlockRuleset {
  int fd = -1;  // -1: not enforced (disabled in the spec)
  int abi = 0;
};

bool build_landlock(const Spec& spec, const MountReport& mounts, LandlockRuleset& out, StepError& e);
// In the exec child, after PR_SET_NO_NEW_PRIVS. Returns false with errno set.
bool landlock_enforce(const LandlockRuleset& rs);

}  // namespace kiln::helper
