// `kiln serve`'s artifact routes (/a/NAME/..., /healthz) as a pure request -> response function (no
// sockets), so every rule about paths, share modes, caching and ranges is unit-testable and fuzzable.
#pragma once

#include <functional>
#include <optional>
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
  // Whether NAME is an app (serve/app_supervisor.h): its files are never served as pages, only
  // Kiln's own /a/NAME/_kiln/ routes are answered here (the front door forwards the rest).
  std::function<bool(std::string_view name)> is_app;
};

Response route(const Request& req, const RouterContext& ctx);

// The share mode in front of an app (serve/app_front_door.h), decided from the request head alone:
// either Kiln's own answer (login page, refusal, the invite link's redirect), or admission with
// what the app may see of the request.
struct AppAdmission {
  std::optional<Response> answer;
  std::string name;    // the artifact
  std::string user;    // X-Kiln-User: the invite's name, "password" or "public"
  std::string target;  // the request-target without /a/NAME (at least "/"), its invite parameter removed
  std::string cookie;  // the client's Cookie header without Kiln's own cookie; empty: none left
};
// For /a/NAME/... of an app (the caller checked that NAME is one).
AppAdmission admit_app(const Request& head, const RouterContext& ctx);

}  // namespace kiln::server::http
