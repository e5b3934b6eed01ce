// `kiln serve`'s artifact routes (/a/NAME/..., /healthz) as a pure request -> response function (no
// sockets), so every rule about paths, share modes, caching and ranges is unit-testable and fuzzable.
#pragma once

#include <string>

#include "http/message.h"

namespace kiln::artifacts {
class ArtifactStore;
}

namespace kiln::server::http {

class ServeCache;

struct RouterContext {
  artifacts::ArtifactStore* store = nullptr;
  std::string state_dir;
  long pid = 0;
  std::string cookie_name = "kiln_session";
  ServeCache* cache = nullptr;  // optional: spares the store repeated questions (serve_cache.h)
};

Response route(const Request& req, const RouterContext& ctx);

}  // namespace kiln::server::http
