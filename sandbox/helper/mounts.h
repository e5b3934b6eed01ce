// The new root: a tmpfs holding only read-only system binds, the workspace, private /tmp, /dev/shm,
// /proc and a minimal /dev, then pivot_root so nothing of the host's tree stays reachable.
#pragma once

#include <string>
#include <vector>

#include "sandbox/helper/proc_mask.h"
#include "sandbox/helper/spec.h"
#include "sandbox/helper/step_error.h"

namespace kiln::helper {

struct MountedPath {
  std::string path;  // as seen inside the sandbox
  bool is_dir = true;
};

struct MountReport {
  std::vector<MountedPath> ro;       // read-only binds actually mounted (symlinks excluded)
  std::vector<std::string> skipped;  // ro_binds absent on this host
  std::vector<std::string> dev_nodes;  // "/dev/null", ...
  ProcReport proc;                     // the read-only /proc and what in it is hidden
};

// Step "mounts": everything up to, not including, pivot_root. Must run as pid 1 of the new pid
// namespace (for /proc) inside the new mount namespace.
bool build_root(const Spec& spec, MountReport& report, StepError& e);
// Step "pivot_root": switch to the new root and detach the host's tree.
bool enter_root(StepError& e);

}  // namespace kiln::helper
