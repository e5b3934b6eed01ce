// The control API of the app supervisor: POST /_kiln/apps with a JSON {op, artifact, ...}, for
// kiln's own tools (publish, app_status, schedule_run, secret pages, ...) on this machine. It takes
// the state directory's bearer token (`kiln serve --print-token` prints it) and loopback clients only.
#pragma once

#include <string>

#include "http/server.h"

namespace kiln::server::apps {

class Supervisor;
}  // namespace kiln::server::apps

namespace kiln::server::secrets {
class SecretRequests;
}  // namespace kiln::server::secrets

namespace kiln::server::apps {

inline constexpr const char* kControlPath = "/_kiln/apps";

// A request from this machine (loopback, or this host's own address) that no proxy relayed: a
// proxy on this machine comes from loopback too, on behalf of anyone.
bool from_this_machine(const http::Request& r);

// Answers: 200 with the operation's JSON, or 4xx with {"error"}. Operations that wait for an
// app or a schedule answer 200 at once and stream their JSON when done ({"error", "code"} if
// they failed), so they never hold the listener's endpoint threads.
// {"op":"secret_request","name":N} (with `secret_pages`) issues a one-time page for secret N
// (serve/secret_page.h): 200 {"url","expires_in_s","name"}, 400 for a name that is not a secret name.
http::Endpoint control_endpoint(Supervisor& supervisor, std::string token,
                                secrets::SecretRequests* secret_pages = nullptr);

}  // namespace kiln::server::apps
