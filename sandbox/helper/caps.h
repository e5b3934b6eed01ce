// Capability drop for the exec child: the user namespace gave it every capability, the command
// must keep none (not even as uid 0 inside, which exec would otherwise refill).
#pragma once

namespace kiln::helper {

// Returns false with errno set; safe between fork and exec (no allocation).
bool drop_all_capabilities();

}  // namespace kiln::helper
