// What a kiln command needs from its surroundings before it starts work: room for open files,
// termination signals taken by a thread of their own, and where the kiln-sandbox helper is.
#pragma once

#include <stop_token>
#include <string>

namespace kiln::cli {

// Raises the soft RLIMIT_NOFILE to the hard limit, at most 65536. Desktop sessions start processes
// with a soft limit of 1024 (kept low for select(), which kiln does not use), while a server of
// sandboxes holds pipes, pidfds, cgroup folders, databases and its egress proxy's connections.
void raise_open_file_limit();

// For one-shot commands (`kiln run`, `kiln verify`): SIGINT, SIGTERM and SIGHUP are taken by a
// thread that requests the returned stop, so Ctrl-C kills the sandboxed tree and kiln still
// reports and exits with the right code. Call before any other thread starts.
std::stop_source stop_on_termination_signals();

// KILN_SANDBOX_HELPER, else kiln-sandbox next to the kiln binary (or in ../libexec/kiln/).
std::string default_helper_path();

}  // namespace kiln::cli
