// The outer process's steps: join kiln's cgroups, enter a user namespace with the caller's own ids,
// then unshare the rest. Each returns false with a StepError naming what failed.
#pragma once

#include "sandbox/helper/spec.h"
#include "sandbox/helper/step_error.h"

namespace kiln::helper {

bool join_cgroups(const Spec& spec, StepError& e);
bool enter_userns(const Spec& spec, StepError& e);
bool unshare_namespaces(const Spec& spec, StepError& e);

}  // namespace kiln::helper
