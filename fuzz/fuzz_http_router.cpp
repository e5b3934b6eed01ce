// Fuzzes `kiln serve`'s router (serve/artifact_router.cpp, http/parse.cpp, serve/serve_cache.cpp) against a real
// artifact store with a public site, a single-file artifact, a password-protected and an
// invite-only artifact. No 500, no header injection, no redirect off the site, ranges inside the
// file, and a protected artifact's files only for a request that carries its cookie or invite.
#include <set>

#include "artifacts/artifact_store.h"
#include "fuzz/fuzz_support.h"
#include "serve/serve_cache.h"
#include "serve/artifact_router.h"
#include "http/parse.h"
#include "workspace/root.h"

namespace fs = std::filesystem;
using kiln::fuzz::violated;
using namespace kiln::server::http;
using kiln::artifacts::Share;

namespace {

struct World {
  std::unique_ptr<kiln::artifacts::ArtifactStore> store;
  std::unique_ptr<ServeCache> cache;
  RouterContext ctx;
  std::string secret_cookie, club_cookie, club_token;
};

World& world() {
  static World* w = [] {
    kiln::fuzz::quiet_logs();
    auto* w = new World;
    const std::string top = kiln::fuzz::scratch_dir();
    const std::string ws = top + "/ws";
    kiln::fuzz::write_file(ws + "/site/index.html", "<!doctype html><h1>hello</h1>\n");
    kiln::fuzz::write_file(ws + "/site/about.html", "<p>about</p>\n");
    kiln::fuzz::write_file(ws + "/site/docs/index.html", "<p>docs</p>\n");
    kiln::fuzz::write_file(ws + "/site/404.html", "<p>missing</p>\n");
    kiln::fuzz::write_file(ws + "/site/data.txt", std::string(5000, 'x'));
    kiln::fuzz::write_file(ws + "/report.html", "<h1>report</h1>\n");
    auto s = kiln::artifacts::ArtifactStore::open(top + "/state");
    if (!s) violated("artifact store", s.error().message);
    w->store = std::move(*s);
    // A frozen clock: nothing expires mid-run, and once an address used up its failed logins it
    // stays rate limited, which spares the fuzzer Argon2 on every guess.
    w->store->set_clock([] { return std::int64_t{1'800'000'000}; });
    auto root = kiln::workspace::Root::open(ws);
    if (!root) violated("root", root.error().message);
    auto publish = [&](const std::string& path, const std::string& name, Share share, const std::string& pw,
                       std::vector<std::string> invites) {
      kiln::artifacts::PublishRequest req;
      req.workspace_id = "ws_fuzz";
      req.root = &*root;
      req.path = path;
      req.name = name;
      req.share = share;
      req.password = pw;
      req.invite_names = std::move(invites);
      auto r = w->store->publish(req);
      if (!r) violated("publish", r.error().message);
      return *r;
    };
    publish("site", "site", Share::public_, "", {});
    publish("site", "site", Share::public_, "", {});  // a second version
    publish("report.html", "report", Share::public_, "", {});
    publish("site", "secret", Share::password, "hunter2", {});
    auto club = publish("site", "club", Share::invite, "", {"friend"});
    w->club_token = club.new_invites.at(0).token;
    kiln::artifacts::Credentials c;
    c.client = "setup";
    c.password = "hunter2";
    w->secret_cookie = w->store->check_access("secret", std::nullopt, c).set_cookie.value_or("");
    kiln::artifacts::Credentials i;
    i.client = "setup";
    i.invite_token = w->club_token;
    w->club_cookie = w->store->check_access("club", std::nullopt, i).set_cookie.value_or("");
    if (w->secret_cookie.empty() || w->club_cookie.empty()) violated("no cookies from the setup logins");
    w->cache = std::make_unique<ServeCache>(top + "/state", "artifacts.db");
    w->ctx.store = w->store.get();
    w->ctx.state_dir = top + "/state";
    w->ctx.pid = 1;
    return w;
  }();
  return *w;
}

// "{S}" and "{C}" become the secret's and the club's session cookies, "{I}" the club's invite token,
// so the fuzzer reaches the paths behind a successful login without guessing a 256-bit secret.
std::string expand(std::string s, const World& w, bool& has_secret, bool& has_club) {
  auto sub = [&](std::string_view from, const std::string& to, bool& flag) {
    for (auto at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) {
      s.replace(at, from.size(), to);
      flag = true;
    }
  };
  sub("{S}", w.secret_cookie, has_secret);
  sub("{C}", w.club_cookie, has_club);
  sub("{I}", w.club_token, has_club);
  return s;
}

bool is_header_safe(const std::string& s) {
  for (unsigned char c : s)
    if (c == '\r' || c == '\n' || c == 0) return false;
  return true;
}

}  // namespace

// Fields ('\n'-separated): flags, method, target, Cookie, Authorization, Range, If-None-Match,
// If-Range, Content-Type, Accept, body. flags[0] bit 0: use the serve cache; bit 1: local client.
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  World& w = world();
  auto f = kiln::fuzz::fields(std::string_view(reinterpret_cast<const char*>(data), size), 11);
  const unsigned flags = f[0].empty() ? 0 : static_cast<unsigned char>(f[0][0]);
  bool secret = false, club = false;
  Request req;
  req.method = f[1];
  req.target = expand(f[2], w, secret, club);
  req.cookie = expand(f[3], w, secret, club);
  req.authorization = f[4];
  req.range = f[5];
  req.if_none_match = f[6];
  req.if_range = f[7];
  req.content_type = f[8];
  req.accept = f[9];
  req.body = expand(f[10], w, secret, club);
  req.client = "fuzz";
  req.client_is_local = flags & 2;
  RouterContext ctx = w.ctx;
  ctx.cache = (flags & 1) ? w.cache.get() : nullptr;

  Response r = route(req, ctx);

  static const std::set<int> statuses = {200, 206, 301, 303, 304, 400, 401, 403, 404, 405, 410, 413, 415, 416, 429};
  if (!statuses.contains(r.status)) violated("unexpected status", std::to_string(r.status) + " for " + req.target);
  for (const auto& [k, v] : r.headers) {
    if (!is_header_safe(k) || !is_header_safe(v)) violated("a header carries CR, LF or NUL", k + ": " + v);
    // Browsers read '\\' as '/' in a path ("/\\evil.example" leaves the site); in the query it is data.
    if (k == "Location" && (!v.starts_with("/") || v.starts_with("//") ||
                            v.substr(0, v.find('?')).find('\\') != std::string::npos))
      violated("redirect off the site", v);
    if (k == "Set-Cookie" && v.find("Path=/a/") == std::string::npos) violated("cookie without an artifact path", v);
  }
  if (!r.file_path.empty()) {
    if (r.file_offset > r.file_size || r.file_length > r.file_size - r.file_offset)
      violated("range outside the file", req.range);
    if (r.status != 200 && r.status != 206 && r.status != 404) violated("a file with status", std::to_string(r.status));
    // A protected artifact's bytes need its credential in the request (password guesses are
    // rate limited after a few, and the password itself is not in any seed).
    std::string why;
    auto t = parse_target(req.target, &why);
    if (!t || t->segments.size() < 2) violated("a file for a target the router cannot parse", req.target);
    if ((t->segments[1] == "secret" && !secret) || (t->segments[1] == "club" && !club))
      violated("a protected file was served without its cookie or invite", req.target);
  }
  return 0;
}
