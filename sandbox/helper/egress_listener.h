// The sandbox end of the egress proxy: pid 1 listens on a 127.0.0.1 port of the sandbox's own
// network namespace for each exec that may reach the network, and hands every accepted connection
// to kiln on the control channel. Nothing of it is in the sandbox's filesystem, and the commands
// cannot replace it: the port is taken before they start, and pid 1 is not theirs to signal.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace kiln::helper {

// A listening socket (CLOEXEC, non-blocking) on 127.0.0.1 with a kernel-chosen port, or -1 with
// errno kept.
int egress_listen(int& port);

// The proxy variables every exec with egress gets: upper and lower case, plus the ones npm, yarn
// and pip read instead; NO_PROXY covers only the sandbox's own loopback.
// `env` is the exec's environment as requested: git reads http.proxy from its config before the
// variables, so the proxy is also added as one more GIT_CONFIG_COUNT entry, after any the
// request already has (a repository's own .git/config cannot point git elsewhere).
std::vector<std::pair<std::string, std::string>> egress_env(int port, const std::map<std::string, std::string>& env);

}  // namespace kiln::helper
