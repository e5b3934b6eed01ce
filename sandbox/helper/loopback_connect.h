// The `connect` op: pid 1 lives in the sandbox's network namespace, so it opens TCP connections to
// the sandbox's own 127.0.0.1 for kiln (which cannot join that namespace as a plain user).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace kiln::helper {

struct ConnectFailure {
  std::string step;  // "request" for a refused message, "connect" for a socket that failed
  int err = 0;
  std::string message;
};

// Starts a non-blocking connect to 127.0.0.1:<port> named by the request; returns the socket
// (connected or still connecting, CLOEXEC) or -1 with `why` filled. Never blocks.
int loopback_connect(const nlohmann::json& request, ConnectFailure& why);

}  // namespace kiln::helper
