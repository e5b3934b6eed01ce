// Finding an exec's processes without cgroups: descendants of its shepherd (the subreaper) plus
// anything still in its session or process group, read from /proc of the sandbox's pid namespace.
#pragma once

#include <sys/types.h>

namespace kiln::helper {

// Signals every live process of the exec (never pid 1 or the shepherd). For SIGKILL it repeats
// until a scan finds nothing new, so processes forked during the kill are caught too.
void signal_exec_tree(pid_t shepherd, pid_t session, int sig);

}  // namespace kiln::helper
