// Network inside the sandbox: a new net namespace has only a down `lo`; "loopback" brings it up.
#pragma once

#include "sandbox/helper/spec.h"
#include "sandbox/helper/step_error.h"

namespace kiln::helper {

bool setup_network(const Spec& spec, StepError& e);

}  // namespace kiln::helper
