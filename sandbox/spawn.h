// Starting a child process (the kiln-sandbox helper, or a plain child for isolation "none") with
// exactly the file descriptors we name and nothing else from the server.
#pragma once

#include <sys/resource.h>
#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

#include "core/error.h"

namespace kiln::sandbox {

struct SpawnSpec {
  std::string path;                          // absolute; no PATH search
  std::vector<std::string> argv;
  std::vector<std::string> env;              // "NAME=value"
  std::vector<std::pair<int, int>> fds;      // (target fd in the child, source fd here)
  std::string cwd;                           // empty: inherit
  bool setsid = false;                       // new session and process group
  bool pdeathsig = false;                    // SIGKILL when the spawning thread dies
  std::vector<std::pair<int, rlim_t>> rlimits;  // resource, soft=hard value
  std::vector<int> cgroup_procs_fds;         // open tasks (v1) or cgroup.procs (v2) files: the child writes 0 to each first
};

// Spawns and returns the pid. Errors from the child before exec (bad cwd, exec failure) come
// back as the error, with errno's text.
Result<pid_t> spawn_process(const SpawnSpec& spec);

// pidfd_open(2); -1 when the kernel lacks it.
int open_pidfd(pid_t pid);

}  // namespace kiln::sandbox
