// kiln serve as the front door of its apps: which requests go to an app (http::ProxyRoute), the
// share mode decided before a byte reaches it, and what the app sees of the request.
#pragma once

#include <memory>

#include "http/server.h"
#include "serve/artifact_router.h"

namespace kiln::server::apps {

class Supervisor;

// Admission checks (a password is deliberately slow to check) and waits for a waking app run on
// threads of the route's own, never on the listener's io threads. The route keeps `supervisor`
// and `ctx` by reference: they must outlive the server.
http::ProxyRoute app_route(Supervisor& supervisor, const http::RouterContext& ctx);

}  // namespace kiln::server::apps
