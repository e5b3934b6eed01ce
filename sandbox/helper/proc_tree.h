// Finding an exec's processes without cgroups: descendants of its shepherd (the subreaper) plus
// anything still in its session or process group, read from /proc of the sandbox's pid namespace.
#pragma once

#include <cstdint>
#include <sys/types.h>

namespace kiln::helper {

// Signals every live process of the exec (never pid 1 or the shepherd). For SIGKILL it repeats
// until a scan finds nothing new, so processes forked during the kill are caught too.
void signal_exec_tree(pid_t shepherd, pid_t session, int sig);

// CPU time (user + system, ms) of the exec's tree as /proc shows it now: every live process of it
// plus what their reaped children used (cutime/cstime), the shepherd's included. Processes reaped
// by pid 1 after their shepherd died are not counted, so callers keep the maximum they have seen.
std::uint64_t exec_tree_cpu_ms(pid_t shepherd, pid_t session);

// Resident anonymous and shared-memory bytes (RssAnon + RssShmem) of the exec's live processes,
// or of every process but pid 1 when `shepherd` and `session` are both 0. File-backed pages
// (binaries, libraries) are not counted: they are shared and reclaimable.
std::uint64_t resident_bytes(pid_t shepherd, pid_t session);

}  // namespace kiln::helper
