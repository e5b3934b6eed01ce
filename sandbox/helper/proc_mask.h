// The sandbox's /proc is mounted read-only and its host-wide entries masked, because with Kiln run
// as root the sandbox's uid 0 is the host's uid 0, and the kernel guards /proc/sys and friends by
// uid and mode only: a writable /proc there is host root (kernel/core_pattern runs as root).
#pragma once

#include <string>
#include <vector>

#include "sandbox/helper/step_error.h"

namespace kiln::helper {

struct ProcReport {
  std::vector<std::string> masked;     // host-wide entries hidden (empty file or empty folder)
  std::vector<std::string> read_only;  // entries re-bound read-only on top of the read-only mount
};

// Mounts a new read-only procfs at `dst` (a path under the build root, e.g. /newroot/proc) and
// hides the entries listed in proc_mask.cpp. `null_dev` is a host /dev/null to bind over files.
bool mount_proc(const std::string& dst, const std::string& null_dev, ProcReport& report, StepError& e);

}  // namespace kiln::helper
