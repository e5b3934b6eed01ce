// The artifact server's rules in one place: which URL means which artifact, version and file,
// who may see it (the store decides, the router translates), and how it may be cached.
#include "serve/artifact_router.h"

#include <algorithm>
#include <cctype>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "artifacts/artifact_store.h"
#include "http/mime_types.h"
#include "http/parse.h"
#include "serve/pages.h"
#include "serve/serve_cache.h"

namespace kiln::server::http {
namespace {

using artifacts::AccessDecision;
using artifacts::AccessOutcome;
using artifacts::Credentials;
using artifacts::ResolvedFile;
using artifacts::Share;

// Our own pages get kOwnPageCsp (pages.h); the user's files only frame-ancestors, so whatever
// their site does keeps working.
constexpr std::size_t kMaxFormBody = 4096;

void add(Response& r, std::string name, std::string value) { r.headers.emplace_back(std::move(name), std::move(value)); }

void security_headers(Response& r, bool own_page) {
  add(r, "X-Content-Type-Options", "nosniff");
  add(r, "Referrer-Policy", "no-referrer");  // invite tokens in URLs must never leak onwards
  add(r, "Content-Security-Policy", own_page ? kOwnPageCsp : "frame-ancestors 'none'");
}

Response page(const Request& req, int status, std::string html) {
  Response r;
  r.status = status;
  r.head = req.method == "HEAD";
  r.body = std::move(html);
  add(r, "Content-Type", "text/html; charset=utf-8");
  add(r, "Cache-Control", "no-store");
  security_headers(r, true);
  return r;
}

Response message(const Request& req, int status, std::string_view title, std::string_view text) {
  return page(req, status, message_page(status, title, text));
}

Response redirect(const Request& req, int status, std::string location) {
  Response r;
  r.status = status;
  r.head = req.method == "HEAD";
  add(r, "Location", std::move(location));
  add(r, "Cache-Control", status == 301 ? "public, max-age=3600" : "no-store");
  security_headers(r, true);
  return r;
}

std::string with_query(std::string path, std::string_view query) {
  if (!query.empty()) path.append("?").append(query);
  return path;
}

const char* outcome_name(AccessOutcome o) {
  switch (o) {
    case AccessOutcome::allowed: return "allowed";
    case AccessOutcome::need_login: return "need_login";
    case AccessOutcome::rate_limited: return "rate_limited";
    case AccessOutcome::denied: return "denied";
    case AccessOutcome::expired: return "expired";
    case AccessOutcome::not_found: return "not_found";
  }
  return "unknown";
}

// A browser shows our login page; with a Basic challenge it would pop its own dialog first.
bool browser_navigation(const Request& req) {
  return req.sec_fetch_mode == "navigate" || req.accept.find("text/html") != std::string::npos;
}

bool starts_with_ci(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() &&
         std::equal(prefix.begin(), prefix.end(), s.begin(), [](char a, char b) {
           return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
         });
}

bool is_version_segment(std::string_view s) {
  return !s.empty() && s.size() <= 9 && s.front() != '0' &&
         std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
}

void set_cookie(Response& r, const RouterContext& ctx, const std::string& name, const std::string& value, std::int64_t max_age) {
  if (!value.empty() && !cookie_safe(value)) {
    spdlog::error("serve: the store issued a session cookie with characters a cookie cannot carry; not sent");
    return;
  }
  add(r, "Set-Cookie", fmt::format("{}={}; Path=/a/{}/; Max-Age={}; HttpOnly; SameSite=Lax", ctx.cookie_name, value,
                                   name, max_age));
}

Response need_login(const Request& req, const std::string& name, const std::string& next, std::string_view error) {
  Response r = page(req, 401, login_page(name, next, error));
  if (!browser_navigation(req)) {
    add(r, "WWW-Authenticate", fmt::format("Basic realm=\"kiln: {}\", charset=\"UTF-8\"", name));
  }
  return r;
}

// Every outcome but `allowed`, as the page a visitor sees.
Response refusal(const Request& req, const AccessDecision& d, const std::string& name, const std::string& next,
                 bool password_tried) {
  switch (d.outcome) {
    case AccessOutcome::need_login:
      return need_login(req, name, next, password_tried ? "That password is not right. Try again." : "");
    case AccessOutcome::rate_limited: {
      Response r = message(req, 429, "Too many attempts",
                           "Too many wrong passwords from your address. Wait a little, then try again.");
      add(r, "Retry-After", std::to_string(std::max(1, d.retry_after_s)));
      return r;
    }
    case AccessOutcome::denied:
      return message(req, 403, "This link does not give access",
                     "The invite is missing, revoked or expired. Ask whoever shared it for a new link.");
    case AccessOutcome::expired:
      return message(req, 410, "This link has expired", "Ask whoever shared it to share it again.");
    case AccessOutcome::allowed:
    case AccessOutcome::not_found: break;
  }
  return message(req, 404, "Not found", "There is nothing published at this address.");
}

Response file_response(const Request& req, const ResolvedFile& f, std::string cache_control, int status,
                       bool conditional) {
  Response r;
  r.status = status;
  r.head = req.method == "HEAD";
  std::string etag = "\"" + f.sha256 + "\"";
  std::string type = f.content_type.empty() ? std::string(mime_type_for(f.logical_path)) : f.content_type;
  if (type.empty()) type = "application/octet-stream";
  add(r, "ETag", etag);
  add(r, "Cache-Control", std::move(cache_control));
  if (conditional && !req.if_none_match.empty() && etag_matches(req.if_none_match, etag)) {
    r.status = 304;
    security_headers(r, false);
    return r;
  }
  add(r, "Content-Type", type);
  add(r, "Accept-Ranges", "bytes");
  security_headers(r, false);
  r.file_path = f.blob_path;
  r.file_sha256 = f.sha256;
  r.file_size = f.size;
  r.file_length = f.size;
  // If-Range with our strong ETag only; a date or another tag means "send it all".
  if (conditional && !req.range.empty() && (req.if_range.empty() || req.if_range == etag)) {
    ByteRange br = parse_range(req.range, f.size);
    if (br.kind == ByteRange::partial) {
      r.status = 206;
      r.file_offset = br.first;
      r.file_length = br.length;
      add(r, "Content-Range", fmt::format("bytes {}-{}/{}", br.first, br.first + br.length - 1, f.size));
    } else if (br.kind == ByteRange::unsatisfiable) {
      r.status = 416;
      r.file_path.clear();
      r.file_length = 0;
      add(r, "Content-Range", fmt::format("bytes */{}", f.size));
    }
  }
  return r;
}

struct Visit {
  const Request& req;
  const RouterContext& ctx;
  const Target& t;
  std::string name;
  std::vector<std::string> rest;  // segments after /a/NAME/ (and v/N/)
  std::optional<int> version;
  AccessDecision decision;
  bool decided = false;
  std::string cache_key;  // set when the cache may answer or learn this request's access
  ServeCache::Stamp stamp;
  bool stamped = false;  // `stamp` was taken for this request (before any store query)
};

void take_stamp(Visit& v) {
  if (v.stamped) return;
  v.stamp = v.ctx.cache->stamp();
  v.stamped = true;
}

// The steady state of a protected page: a visitor whose only credential is the session cookie.
// Admitted from the artifact's access rules in memory (the signature and every field checked as
// the store would, no query, no lock of the store); anything but an admission is left to
// check_access, which gives the same refusals as before.
std::optional<AccessDecision> admit_by_cookie(Visit& v, const Credentials& creds) {
  ServeCache* c = v.ctx.cache;
  if (!c || !creds.cookie || creds.password || creds.invite_token) return std::nullopt;
  take_stamp(v);
  auto rules = c->rules(v.name, v.stamp);
  if (!rules) {
    auto loaded = v.ctx.store->access_rules(v.name);
    if (!loaded || !*loaded) return std::nullopt;
    rules = std::make_shared<const artifacts::AccessRules>(std::move(**loaded));
    c->put_rules(rules, v.stamp);
  }
  return v.ctx.store->admit_cookie(*rules, v.version, *creds.cookie);
}

std::string rel_path(const Visit& v) {
  std::string rel;
  for (const auto& s : v.rest) rel += (rel.empty() ? "" : "/") + s;
  if (v.t.trailing_slash && !rel.empty()) rel += "/";
  return rel;
}

std::string cache_control(const Visit& v) {
  return v.decision.share != Share::public_ ? "private, no-cache"
         : v.version                          ? "public, max-age=31536000, immutable"
                                              : "no-cache";
}

void log_access(const Visit& v, const Response& r) {
  if (!v.decided) return;
  std::string_view path = v.t.raw_path;
  if (path.size() > 200) path = path.substr(0, 200);
  // Never the password, cookie or token: only who (the invite's name) and what happened.
  spdlog::info("access {} {} artifact={} version={} share={} outcome={} status={} client={}{}", v.req.method, path,
               v.name, v.decision.version, artifacts::to_string(v.decision.share), outcome_name(v.decision.outcome),
               r.status, v.req.client, v.decision.invite_name.empty() ? "" : " invite=" + v.decision.invite_name);
}

Credentials base_credentials(const Visit& v) {
  Credentials c;
  c.client = v.req.client;
  c.cookie = cookie_value(v.req.cookie, v.ctx.cookie_name);
  return c;
}

Response login_route(Visit& v) {
  const Request& req = v.req;
  std::string next;
  if (req.method == "POST") {
    if (!starts_with_ci(req.content_type, "application/x-www-form-urlencoded")) {
      return message(req, 415, "Unsupported form", "The login form posts application/x-www-form-urlencoded.");
    }
    if (req.body.size() > kMaxFormBody) return message(req, 413, "Too large", "The login form is at most 4 KiB.");
    auto form = parse_form(req.body);
    next = safe_next(form["next"], v.name);
    Credentials c;
    c.client = req.client;
    c.password = form["password"];
    v.decision = v.ctx.store->check_access(v.name, std::nullopt, c);
    v.decided = true;
    if (v.decision.outcome != AccessOutcome::allowed) return refusal(req, v.decision, v.name, next, true);
    Response r = redirect(req, 303, next);
    if (v.decision.set_cookie) set_cookie(r, v.ctx, v.name, *v.decision.set_cookie, v.decision.cookie_max_age_s);
    return r;
  }
  next = safe_next(query_param(v.t.query, "next").value_or(""), v.name);
  v.decision = v.ctx.store->check_access(v.name, std::nullopt, base_credentials(v));
  v.decided = true;
  if (v.decision.outcome == AccessOutcome::allowed) return redirect(req, 303, next);
  if (v.decision.outcome == AccessOutcome::need_login) return page(req, 200, login_page(v.name, next, ""));
  return refusal(req, v.decision, v.name, next, false);
}

Response kiln_route(Visit& v) {
  if (v.rest.size() == 2 && v.rest[1] == "login" && !v.t.trailing_slash) return login_route(v);
  if (v.rest.size() == 2 && v.rest[1] == "logout" && !v.t.trailing_slash) {
    Response r = redirect(v.req, 303, "/a/" + v.name + "/");
    set_cookie(r, v.ctx, v.name, "", 0);
    return r;
  }
  return message(v.req, 404, "Not found", "There is nothing published at this address.");
}

// The store's answer for (name, version number, path) never depends on who asks, so it is
// cached for protected artifacts too; only whether they may see it is asked every time.
Result<ResolvedFile> resolve_cached(Visit& v, std::optional<int> version, const std::string& rel) {
  ServeCache* c = v.ctx.cache;
  if (!c || !version) return v.ctx.store->resolve(v.name, version, rel);
  take_stamp(v);
  const ServeCache::Stamp before = v.stamp;
  std::string key = ServeCache::key(ServeCache::Kind::file, v.name, version, rel);
  if (auto hit = c->get(key, before)) return hit->file;
  auto f = v.ctx.store->resolve(v.name, version, rel);
  if (f) c->put(key, {*version, *f}, before);
  return f;
}

Response serve_file(Visit& v) {
  const Request& req = v.req;
  auto& store = *v.ctx.store;
  std::string rel = rel_path(v);
  std::optional<int> version = v.version;
  if (!version && v.decision.version > 0) version = v.decision.version;
  std::string cache = cache_control(v);
  auto f = resolve_cached(v, version, rel);
  // An app's files are its source (kiln.json, server code): never pages, whether or not the
  // front door has heard of the app yet.
  if (f && f->app) return message(req, 404, "Not found", "There is nothing published at this address.");
  if (f) {
    bool folder = f->logical_path != rel && !rel.empty();
    if (folder && !v.t.trailing_slash) return redirect(req, 301, with_query(v.t.raw_path + "/", v.t.query));
    // A file asked for as a folder ("page.html/") is not there.
    if (!v.t.trailing_slash || rel.empty() || f->logical_path == rel + "index.html") {
      if (!v.cache_key.empty() && v.decision.share == Share::public_ && !v.decision.set_cookie) {
        v.ctx.cache->put(v.cache_key, {v.decision.version, *f}, v.stamp);
      }
      return file_response(req, *f, cache, 200, true);
    }
  } else if (f.error().code != Errc::not_found) {
    spdlog::error("serve: {} {}: {}", v.name, rel, f.error().message);
    return message(req, 500, "Server error", "The published files could not be read; the server log says why.");
  }
  // What static hosts do: "/about" finds about.html, and the site's own 404.html answers misses.
  if (!rel.empty() && !v.t.trailing_slash && v.rest.back().find('.') == std::string::npos) {
    if (auto html = store.resolve(v.name, version, rel + ".html"); html && !html->app) return file_response(req, *html, cache, 200, true);
  }
  if (auto nf = store.resolve(v.name, version, "404.html"); nf && !nf->app) return file_response(req, *nf, "no-cache", 404, false);
  return message(req, 404, "Not found", "There is no such file in this artifact.");
}

Response artifact_route(Visit& v) {
  const Request& req = v.req;
  if (v.rest.size() >= 2 && v.rest[0] == "v" && is_version_segment(v.rest[1])) {
    v.version = std::stoi(v.rest[1]);
    v.rest.erase(v.rest.begin(), v.rest.begin() + 2);
    if (v.rest.empty() && !v.t.trailing_slash) return redirect(req, 301, with_query(v.t.raw_path + "/", v.t.query));
  }
  if (!v.version && !v.rest.empty() && v.rest[0] == "_kiln") return kiln_route(v);
  // An app's published files are its source: the front door forwards its requests to the app,
  // and nothing of the version is ever served from here.
  if (v.ctx.is_app && v.ctx.is_app(v.name))
    return message(req, 404, "Not found", "There is nothing published at this address.");
  if (req.method == "POST") {
    Response r = message(req, 405, "Method not allowed", "Published artifacts are read with GET or HEAD.");
    add(r, "Allow", "GET, HEAD");
    return r;
  }
  Credentials creds = base_credentials(v);
  if (!req.authorization.empty()) creds.password = basic_password(req.authorization);
  auto invite = query_param(v.t.query, "invite");
  if (invite && !invite->empty()) creds.invite_token = *invite;
  if (v.ctx.cache && !creds.password && !creds.invite_token) {
    // Stamped before the store is asked, so an answer that may predate a change is never kept.
    take_stamp(v);
    v.cache_key = ServeCache::key(ServeCache::Kind::public_answer, v.name, v.version, rel_path(v));
    if (auto hit = v.ctx.cache->get(v.cache_key, v.stamp)) {
      v.decision.outcome = AccessOutcome::allowed;
      v.decision.share = Share::public_;
      v.decision.version = hit->version;
      v.decided = true;
      if (!hit->file.app) return file_response(req, hit->file, cache_control(v), 200, true);
    }
  }
  if (auto fast = admit_by_cookie(v, creds)) {
    v.decision = std::move(*fast);
  } else {
    v.decision = v.ctx.store->check_access(v.name, v.version, creds);
  }
  v.decided = true;
  const auto& d = v.decision;
  std::string here = with_query(v.t.raw_path, v.t.query);
  if (d.outcome != AccessOutcome::allowed) return refusal(req, d, v.name, safe_next(here, v.name), creds.password.has_value());
  // The token leaves the address bar (and history) at once; the cookie carries the access on.
  if (creds.invite_token && (d.set_cookie || d.share == Share::public_)) {
    Response r = redirect(req, 303, with_query(v.t.raw_path, query_without(v.t.query, "invite")));
    if (d.set_cookie) set_cookie(r, v.ctx, v.name, *d.set_cookie, d.cookie_max_age_s);
    return r;
  }
  Response r = serve_file(v);
  if (d.set_cookie) set_cookie(r, v.ctx, v.name, *d.set_cookie, d.cookie_max_age_s);
  return r;
}

Response healthz(const Request& req, const RouterContext& ctx) {
  nlohmann::json j{{"service", "kiln-serve"}, {"version", KILN_VERSION}};
  // Only this host learns where the state lives; the daemon check connects from here.
  if (req.client_is_local) {
    j["state_dir"] = ctx.state_dir;
    j["pid"] = ctx.pid;
  }
  Response r;
  r.head = req.method == "HEAD";
  r.body = j.dump() + "\n";
  add(r, "Content-Type", "application/json");
  add(r, "Cache-Control", "no-store");
  security_headers(r, true);
  return r;
}

// The Cookie header minus every pair named `name` (Kiln's session cookie never reaches an app).
std::string cookie_without(std::string_view header, std::string_view name) {
  std::string out;
  std::size_t pos = 0;
  while (pos < header.size()) {
    std::size_t end = header.find(';', pos);
    if (end == std::string_view::npos) end = header.size();
    std::string_view pair = header.substr(pos, end - pos);
    while (!pair.empty() && pair.front() == ' ') pair.remove_prefix(1);
    std::string_view key = pair.substr(0, pair.find('='));
    while (!key.empty() && key.back() == ' ') key.remove_suffix(1);
    if (!pair.empty() && key != name) out.append(out.empty() ? "" : "; ").append(pair);
    pos = end + 1;
  }
  return out;
}

}  // namespace

AppAdmission admit_app(const Request& req, const RouterContext& ctx) {
  AppAdmission out;
  std::string why;
  auto t = parse_target(req.target, &why);
  if (!t || t->segments.size() < 2) {
    out.answer = message(req, 400, "Bad request", t ? "Apps live at /a/NAME/." : why);
    return out;
  }
  out.name = t->segments[1];
  Visit v{req, ctx, *t, out.name, {}, std::nullopt, {}, false};
  Credentials creds = base_credentials(v);
  if (!req.authorization.empty()) creds.password = basic_password(req.authorization);
  auto invite = query_param(t->query, "invite");
  if (invite && !invite->empty()) creds.invite_token = *invite;
  // A public app asked without credentials: the cache (dropped whenever the database changes)
  // spares the store a query per request.
  const bool bare = !creds.cookie && !creds.password && !creds.invite_token;
  std::string cache_key;
  ServeCache::Stamp stamp;
  if (bare && ctx.cache) {
    stamp = ctx.cache->stamp();
    cache_key = ServeCache::key(ServeCache::Kind::public_answer, out.name, std::nullopt, "\x7f" "app");
    if (ctx.cache->get(cache_key, stamp)) {
      v.decision.outcome = AccessOutcome::allowed;
      v.decision.share = Share::public_;
      v.decided = true;
    }
  }
  if (!v.decided) {
    if (auto fast = admit_by_cookie(v, creds)) {
      v.decision = std::move(*fast);
      v.decided = true;
    }
  }
  if (!v.decided) {
    v.decision = ctx.store->check_access(out.name, std::nullopt, creds);
    v.decided = true;
    if (!cache_key.empty() && v.decision.outcome == AccessOutcome::allowed && v.decision.share == Share::public_ &&
        !v.decision.set_cookie)
      ctx.cache->put(cache_key, {v.decision.version, {}}, stamp);
  }
  const auto& d = v.decision;
  if (d.outcome != AccessOutcome::allowed) {
    out.answer = refusal(req, d, out.name, safe_next(with_query(t->raw_path, t->query), out.name),
                         creds.password.has_value());
    log_access(v, *out.answer);
    return out;
  }
  if (creds.invite_token) {
    out.answer = redirect(req, 303, with_query(t->raw_path, query_without(t->query, "invite")));
    if (d.set_cookie) set_cookie(*out.answer, ctx, out.name, *d.set_cookie, d.cookie_max_age_s);
    log_access(v, *out.answer);
    return out;
  }
  out.user = !d.invite_name.empty() ? d.invite_name : d.share == Share::password ? "password" : "public";
  // raw_path is "/a/<name as sent>/rest": the app sees "/rest", encoded as the client sent it.
  std::size_t third = t->raw_path.find('/', 3);
  std::string rest = third == std::string::npos ? "/" : t->raw_path.substr(third);
  out.target = with_query(rest, query_without(t->query, "invite"));
  out.cookie = cookie_without(req.cookie, ctx.cookie_name);
  spdlog::debug("access {} app={} user={} client={}", req.method, out.name, out.user, req.client);
  return out;
}

Response route(const Request& req, const RouterContext& ctx) {
  if (req.method != "GET" && req.method != "HEAD" && req.method != "POST") {
    Response r = message(req, 405, "Method not allowed", "Published artifacts are read with GET or HEAD.");
    add(r, "Allow", "GET, HEAD");
    return r;
  }
  std::string why;
  auto t = parse_target(req.target, &why);
  if (!t) {
    spdlog::debug("serve: 400 for a request from {}: {}", req.client, why);
    return message(req, 400, "Bad request", why);
  }
  if (t->raw_path == "/healthz" && req.method != "POST") return healthz(req, ctx);
  const auto& seg = t->segments;
  if (seg.size() < 2 || seg[0] != "a" || !artifacts::valid_artifact_name(seg[1])) {
    return message(req, 404, "Not found", "Published artifacts live at /a/NAME/.");
  }
  if (seg.size() == 2 && !t->trailing_slash) return redirect(req, 301, with_query(t->raw_path + "/", t->query));
  Visit v{req, ctx, *t, seg[1], std::vector<std::string>(seg.begin() + 2, seg.end()), std::nullopt, {}, false};
  Response r = artifact_route(v);
  log_access(v, r);
  return r;
}

}  // namespace kiln::server::http
