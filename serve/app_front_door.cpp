// The front door's rules: /a/NAME/... of an app (but not Kiln's own /a/NAME/_kiln/ pages, which the
// artifact router serves) is admitted by the share mode, then forwarded with the /a/NAME prefix
// removed, the forwarding headers and X-Kiln-User set, and Kiln's cookie, the Authorization
// header, the invite token and every client-sent X-Kiln-* header gone; on the way back, any
// Set-Cookie of the app's for Kiln's own cookie is dropped.
#include "serve/app_front_door.h"


#include <fmt/format.h>

#include "artifacts/artifact_store.h"
#include "http/parse.h"
#include "serve/app_supervisor.h"
#include "serve/pages.h"
#include "serve/work_queue.h"

namespace kiln::server::apps {
namespace {

// "/a/NAME/..." -> NAME (decoded, as the router reads it) when the rest is the app's, not Kiln's
// own /a/NAME/_kiln/ pages; empty otherwise ("/a/NAME" without a slash is the router's redirect).
std::string app_name_of(std::string_view target) {
  if (!target.starts_with("/a/")) return {};
  std::string why;
  auto t = http::parse_target(target, &why);
  if (!t || t->segments.size() < 2 || t->segments[0] != "a") return {};
  if (t->segments.size() == 2 && !t->trailing_slash) return {};
  if (t->segments.size() >= 3 && t->segments[2] == "_kiln") return {};
  return artifacts::valid_artifact_name(t->segments[1]) ? t->segments[1] : std::string{};
}

http::Response error_page(int status, const std::string& why, int retry_after_s, bool head) {
  http::Response r;
  r.status = status;
  r.head = head;
  r.body = http::message_page(status, status == 502 ? "The app is not answering" : status == 404 ? "Not found"
                                                                                              : "The app is not ready",
                        why);
  r.headers.emplace_back("Content-Type", "text/html; charset=utf-8");
  r.headers.emplace_back("Cache-Control", "no-store");
  if (retry_after_s > 0) r.headers.emplace_back("Retry-After", std::to_string(retry_after_s));
  return r;
}

// Admission, then a connection to the app (waking it if need be), then the forwarding rules.
void decide_now(Supervisor& supervisor, const http::RouterContext& ctx, const http::Request& head,
                std::function<void(http::ProxyDecision)> reply) {
  auto admission = http::admit_app(head, ctx);
  if (admission.answer) {
    http::ProxyDecision d;
    d.answer = std::move(*admission.answer);
    reply(std::move(d));
    return;
  }
  const bool is_head = head.method == "HEAD";
  std::string name = admission.name;
  supervisor.acquire(name, [&supervisor, &ctx, head, admission = std::move(admission), reply = std::move(reply),
                            is_head](Upstream u) mutable {
    http::ProxyDecision d;
    if (!u.fd) {
      d.answer = error_page(u.status ? u.status : 502, u.why, u.retry_after_s, is_head);
      reply(std::move(d));
      return;
    }
    http::ProxyUpstream up;
    up.fd = std::move(u.fd);
    up.reused = u.reused;
    up.reconnect = [&supervisor, name = admission.name] {
      auto c = supervisor.reconnect(name);
      return c ? std::move(*c) : UniqueFd();
    };
    up.target = admission.target;
    // Kiln's credentials and anything claiming to come from Kiln stay out; the client's
    // forwarding headers are replaced, never appended to.
    up.drop_headers = {"authorization", "cookie", "forwarded", "x-forwarded-for", "x-forwarded-host",
                       "x-forwarded-proto", "x-forwarded-prefix", "x-real-ip"};
    up.drop_prefixes = {"x-kiln-"};
    // Kiln's session cookie is Kiln's alone: an app may neither plant nor clear it (any Path).
    up.drop_set_cookies = {ctx.cookie_name};
    up.set_headers = {{"X-Forwarded-Prefix", "/a/" + admission.name},
                      {"X-Forwarded-Host", head.host},
                      {"X-Forwarded-Proto", "http"},
                      {"X-Forwarded-For", head.client},
                      {"X-Kiln-User", admission.user}};
    if (!admission.cookie.empty()) up.set_headers.emplace_back("Cookie", admission.cookie);
    up.response_timeout = std::chrono::seconds(std::max(1, u.max_wait_s));
    up.done = [&supervisor, name = admission.name](http::ProxyOutcome o) {
      supervisor.release(name, std::move(o.reusable), o.upstream_failed);
    };
    d.upstream = std::move(up);
    reply(std::move(d));
  });
}

}  // namespace

http::ProxyRoute app_route(Supervisor& supervisor, const http::RouterContext& ctx) {
  auto queue = std::make_shared<WorkQueue>(4);
  http::ProxyRoute route;
  route.claims = [&supervisor](std::string_view target) {
    // Asked for every request, every static page included: a name sent without escapes is the
    // name as decoded, so when no app has it the answer is no without decoding the whole target.
    if (!target.starts_with("/a/")) return false;
    std::string_view sent = target.substr(3, target.find_first_of("/?", 3) - 3);
    if (sent.find('%') == std::string_view::npos && !supervisor.is_app(sent)) return false;
    const std::string name = app_name_of(target);
    return !name.empty() && supervisor.is_app(name);
  };
  route.decide = [&supervisor, &ctx, queue](const http::Request& head,
                                             std::function<void(http::ProxyDecision)> reply) {
    // Most requests are quick to decide (a public app, or a session cookie to verify) for an app
    // that runs: then right here. A password to check (deliberately slow) or an app to wake goes
    // to the route's own threads.
    const bool slow = !head.authorization.empty() || !supervisor.running(app_name_of(head.target));
    auto work = [&supervisor, &ctx, head, reply = std::move(reply)]() mutable { decide_now(supervisor, ctx, head, std::move(reply)); };
    if (slow) {
      queue->post(std::move(work));
    } else {
      work();
    }
  };
  return route;
}

}  // namespace kiln::server::apps
