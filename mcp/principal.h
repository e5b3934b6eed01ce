// Who a request acts for (TOOLS.md, "Who may touch what"): over stdio and on the CLI the local
// user, over HTTP the name of the bearer token the request carried. One definition of "the local
// user" keeps stdio sessions, the CLI and the default HTTP token on the same principal.
#pragma once

#include <string>
#include <string_view>

namespace kiln::server {

// The name of the effective user ("alice", "root"), or "uid<N>" when it has no passwd entry.
const std::string& local_principal();

// A token name usable as a principal: 1-64 of [A-Za-z0-9._@-]. Names end up in traces and logs.
bool valid_principal_name(std::string_view name);

}  // namespace kiln::server
