// The control API of the app supervisor: POST /_kiln/apps with a JSON {op, artifact, ...}, for
// kiln's own tools (publish, app_status, schedule_run, ...) on this machine. It takes the state
// directory's bearer token (the one `kiln serve --print-token` prints) and loopback clients only.
#pragma once

#include <string>

#include "http/server.h"

namespace kiln::server::apps {

class Supervisor;

inline constexpr const char* kControlPath = "/_kiln/apps";

// Answers: 200 with the operation's JSON, or 4xx with {"error"}. Operations that wait for an
// app or a schedule answer 200 at once and stream their JSON when done ({"error", "code"} if
// they failed), so they never hold the listener's endpoint threads.
http::Endpoint control_endpoint(Supervisor& supervisor, std::string token);

}  // namespace kiln::server::apps
