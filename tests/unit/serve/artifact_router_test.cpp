// The artifact router against a real ArtifactStore in a temp dir: path rules (traversal attempts
// raw and encoded), redirects, caching, conditional and range requests, and every share mode.
#include <doctest/doctest.h>

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include "artifacts/artifact_store.h"
#include "serve/serve_cache.h"
#include "serve/artifact_router.h"
#include "http/parse.h"
#include "serve/pages.h"
#include "workspace/root.h"

namespace fs = std::filesystem;
using namespace kiln::server::http;
using kiln::artifacts::ArtifactStore;
using kiln::artifacts::Share;
using kiln::artifacts::kPasswordCookieS;

namespace {

struct Fixture {
  fs::path dir;
  std::unique_ptr<ArtifactStore> store;
  RouterContext ctx;
  std::string index_html = "<!doctype html><h1>hello</h1>\n";
  std::string big;

  Fixture() {
    char tmpl[] = "/tmp/kiln-router-XXXXXX";
    dir = ::mkdtemp(tmpl);
    fs::create_directories(dir / "ws/site/docs");
    fs::create_directories(dir / "ws/site/assets");
    write("ws/site/index.html", index_html);
    write("ws/site/style.css", "body{color:red}\n");
    write("ws/site/docs/index.html", "<p>docs</p>\n");
    write("ws/site/about.html", "<p>about</p>\n");
    write("ws/site/assets/logo.svg", "<svg xmlns=\"http://www.w3.org/2000/svg\"/>\n");
    for (int i = 0; i < 10000; ++i) big += static_cast<char>('a' + i % 26);
    write("ws/site/data.txt", big);
    write("ws/site/%2e%2e", "literal percent name\n");
    fs::create_directories(dir / "ws/plain");
    write("ws/plain/index.html", "plain\n");
    auto s = ArtifactStore::open((dir / "state").string());
    REQUIRE_MESSAGE(s.has_value(), (s ? "" : s.error().message));
    store = std::move(*s);
    ctx.store = store.get();
    ctx.state_dir = (dir / "state").string();
    ctx.pid = 4242;
  }
  ~Fixture() { fs::remove_all(dir); }

  void write(const std::string& rel, const std::string& text) { std::ofstream(dir / rel, std::ios::binary) << text; }

  kiln::artifacts::PublishResult publish(const std::string& path, const std::string& name, Share share,
                                         const std::string& password = "", std::vector<std::string> invites = {},
                                         std::optional<std::int64_t> expires = std::nullopt,
                                         std::optional<nlohmann::json> app = std::nullopt) {
    auto root = kiln::workspace::Root::open((dir / "ws").string());
    REQUIRE(root.has_value());
    kiln::artifacts::PublishRequest req;
    req.workspace_id = "ws1";
    req.root = &*root;
    req.path = path;
    req.name = name;
    req.share = share;
    req.password = password;
    req.invite_names = std::move(invites);
    req.expires_in_s = expires;
    req.app = std::move(app);
    auto r = store->publish(req);
    REQUIRE_MESSAGE(r.has_value(), (r ? "" : r.error().message));
    return *r;
  }

  Response get(const std::string& target, std::vector<std::pair<std::string, std::string>> hdrs = {},
               const std::string& method = "GET") {
    Request req;
    req.method = method;
    req.target = target;
    req.client = "127.0.0.1";
    req.client_is_local = true;
    for (auto& [k, v] : hdrs) {
      if (k == "Cookie") req.cookie = v;
      else if (k == "Authorization") req.authorization = v;
      else if (k == "If-None-Match") req.if_none_match = v;
      else if (k == "If-Range") req.if_range = v;
      else if (k == "Range") req.range = v;
      else if (k == "Accept") req.accept = v;
      else if (k == "Content-Type") req.content_type = v;
      else if (k == "Body") req.body = v;
      else if (k == "Client") req.client = v;
      else FAIL("unknown header in test: " << k);
    }
    return route(req, ctx);
  }

  Response post_login(const std::string& name, const std::string& body, const std::string& client = "127.0.0.1") {
    return get("/a/" + name + "/_kiln/login",
               {{"Content-Type", "application/x-www-form-urlencoded"}, {"Body", body}, {"Client", client}}, "POST");
  }
};

std::string hdr(const Response& r, std::string_view name) {
  auto* v = r.header(name);
  return v ? *v : std::string();
}

std::string file_text(const Response& r) {
  std::ifstream in(r.file_path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str().substr(r.file_offset, r.file_length);
}

// "kiln_session=VALUE; Path=..." -> "kiln_session=VALUE"
std::string cookie_pair(const Response& r) {
  std::string c = hdr(r, "Set-Cookie");
  return c.substr(0, c.find(';'));
}

std::string basic(const std::string& password) {
  static const char* t = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string in = "user:" + password, out;
  for (std::size_t i = 0; i < in.size(); i += 3) {
    unsigned v = static_cast<unsigned char>(in[i]) << 16;
    if (i + 1 < in.size()) v |= static_cast<unsigned char>(in[i + 1]) << 8;
    if (i + 2 < in.size()) v |= static_cast<unsigned char>(in[i + 2]);
    out += t[(v >> 18) & 63];
    out += t[(v >> 12) & 63];
    out += i + 1 < in.size() ? t[(v >> 6) & 63] : '=';
    out += i + 2 < in.size() ? t[v & 63] : '=';
  }
  return "Basic " + out;
}

}  // namespace

TEST_CASE("parse_target refuses traversal and encoding tricks, and never decodes twice") {
  std::string why;
  for (const char* bad : {"/a/x/../y", "/a/x/%2e%2e/y", "/a/x/%2E%2E/y", "/a/x/..%2fy", "/a/x/..%2Fy", "/a/x/a%2fb",
                          "/a/x//etc/passwd", "/a/x/..\\y", "/a/x/%5c..%5cy", "/a/x/%00", "/a/x/./y", "/a/x/%2e/y",
                          "/a/x/%zz", "/a/x/%2", "a/x/", "/a/x/\x01", "/a/x/#frag"}) {
    INFO(bad);
    CHECK_FALSE(parse_target(bad, &why).has_value());
  }
  auto t = parse_target("/a/x/%252e%252e/", &why);
  REQUIRE(t);
  CHECK(t->segments == std::vector<std::string>{"a", "x", "%2e%2e"});
  CHECK(t->trailing_slash);
  auto q = parse_target("http://example.com/a/x/y%20z?invite=abc&x=1", &why);
  REQUIRE(q);
  CHECK(q->segments.back() == "y z");
  CHECK(q->query == "invite=abc&x=1");
  CHECK(query_without(q->query, "invite") == "x=1");
  CHECK(query_param(q->query, "invite") == "abc");
}

TEST_CASE("range, etag, cookie, Basic and next parsing") {
  CHECK(parse_range("bytes=0-9", 100).kind == ByteRange::partial);
  CHECK(parse_range("bytes=0-9", 100).length == 10);
  CHECK(parse_range("bytes=-5", 100).first == 95);
  CHECK(parse_range("bytes=90-", 100).length == 10);
  CHECK(parse_range("bytes=90-500", 100).length == 10);
  CHECK(parse_range("bytes=100-", 100).kind == ByteRange::unsatisfiable);
  CHECK(parse_range("bytes=-0", 100).kind == ByteRange::unsatisfiable);
  CHECK(parse_range("bytes=0-1,5-6", 100).kind == ByteRange::whole);
  CHECK(parse_range("bytes=9-1", 100).kind == ByteRange::whole);
  CHECK(parse_range("items=0-1", 100).kind == ByteRange::whole);
  CHECK(etag_matches("W/\"abc\", \"def\"", "\"abc\""));
  CHECK(etag_matches("*", "\"abc\""));
  CHECK_FALSE(etag_matches("\"abd\"", "\"abc\""));
  CHECK(cookie_value("a=1; kiln_session=xyz; b=2", "kiln_session") == "xyz");
  CHECK_FALSE(cookie_value("a=1", "kiln_session").has_value());
  CHECK(basic_password(basic("pa:ss wörd")) == "pa:ss wörd");
  CHECK(safe_next("/a/site/docs/", "site") == "/a/site/docs/");
  for (const char* evil : {"//evil.com/", "https://evil.com/", "/a/other/", "/a/site//evil.com", "/a/site/\\evil",
                           "/a/site/../other/", "/a/site/_kiln/login"}) {
    CHECK(safe_next(evil, "site") == "/a/site/");
  }
}

TEST_CASE("public artifact: files, folders, redirects, caching, HEAD, 304, ranges") {
  Fixture f;
  auto pub = f.publish("site", "site", Share::public_);
  int v = pub.version.number;

  auto r = f.get("/a/site");
  CHECK(r.status == 301);
  CHECK(hdr(r, "Location") == "/a/site/");
  CHECK(f.get("/a/site?x=1").header("Location") != nullptr);
  CHECK(hdr(f.get("/a/site?x=1"), "Location") == "/a/site/?x=1");

  r = f.get("/a/site/");
  REQUIRE(r.status == 200);
  CHECK(file_text(r) == f.index_html);
  CHECK(hdr(r, "Content-Type").starts_with("text/html"));
  CHECK(hdr(r, "ETag").size() == 66);
  CHECK(hdr(r, "Cache-Control") == "no-cache");
  CHECK(hdr(r, "X-Content-Type-Options") == "nosniff");
  CHECK(hdr(r, "Referrer-Policy") == "no-referrer");
  CHECK(hdr(r, "Content-Security-Policy") == "frame-ancestors 'none'");
  CHECK(hdr(r, "Accept-Ranges") == "bytes");
  CHECK_FALSE(r.head);

  auto h = f.get("/a/site/", {}, "HEAD");
  CHECK(h.status == 200);
  CHECK(h.head);
  CHECK(h.content_length() == r.content_length());
  CHECK(hdr(h, "ETag") == hdr(r, "ETag"));

  CHECK(hdr(f.get("/a/site/style.css"), "Content-Type").starts_with("text/css"));
  CHECK(hdr(f.get("/a/site/assets/logo.svg"), "Content-Type") .starts_with("image/svg+xml"));
  auto vr = f.get("/a/site/v/" + std::to_string(v) + "/style.css");
  CHECK(vr.status == 200);
  CHECK(hdr(vr, "Cache-Control") == "public, max-age=31536000, immutable");
  CHECK(f.get("/a/site/v/" + std::to_string(v)).status == 301);
  CHECK(f.get("/a/site/v/99/").status == 404);

  CHECK(f.get("/a/site/docs").status == 301);
  CHECK(hdr(f.get("/a/site/docs"), "Location") == "/a/site/docs/");
  CHECK(file_text(f.get("/a/site/docs/")) == "<p>docs</p>\n");
  CHECK(f.get("/a/site/assets/").status == 404);  // a folder without index.html: no listing
  CHECK(f.get("/a/site/style.css/").status == 404);
  CHECK(f.get("/a/site/missing.txt").status == 404);
  CHECK(file_text(f.get("/a/site/about")) == "<p>about</p>\n");  // clean URLs, as static hosts do
  CHECK(f.get("/a/nosuch/").status == 404);
  CHECK(f.get("/a/Bad_Name/").status == 404);
  CHECK(f.get("/").status == 404);

  auto nm = f.get("/a/site/", {{"If-None-Match", hdr(r, "ETag")}});
  CHECK(nm.status == 304);
  CHECK(nm.content_length() == 0);
  CHECK(f.get("/a/site/", {{"If-None-Match", "\"other\""}}).status == 200);

  auto part = f.get("/a/site/data.txt", {{"Range", "bytes=10-19"}});
  REQUIRE(part.status == 206);
  CHECK(file_text(part) == f.big.substr(10, 10));
  CHECK(hdr(part, "Content-Range") == "bytes 10-19/10000");
  auto tail = f.get("/a/site/data.txt", {{"Range", "bytes=-4"}});
  CHECK(tail.status == 206);
  CHECK(file_text(tail) == f.big.substr(9996));
  auto bad = f.get("/a/site/data.txt", {{"Range", "bytes=10000-"}});
  CHECK(bad.status == 416);
  CHECK(hdr(bad, "Content-Range") == "bytes */10000");
  CHECK(f.get("/a/site/data.txt", {{"Range", "bytes=0-1,4-5"}}).status == 200);
  CHECK(f.get("/a/site/data.txt", {{"Range", "bytes=0-1"}, {"If-Range", "\"stale\""}}).status == 200);

  CHECK(f.get("/a/site/", {}, "PUT").status == 405);
  CHECK(f.get("/a/site/", {}, "DELETE").header("Allow") != nullptr);
  CHECK(f.get("/a/site/index.html", {}, "POST").status == 405);
}

TEST_CASE("traversal attempts are refused or not found, never served") {
  Fixture f;
  f.publish("site", "site", Share::public_);
  for (const char* t : {"/a/site/../plain/", "/a/site/%2e%2e/plain/", "/a/site/..%2fplain/", "/a/site//etc/passwd",
                        "/a/site/..\\..\\etc\\passwd", "/a/site/%5c..%5cetc", "/a/site/index.html%00.css",
                        "/a/site/./index.html", "/a/../a/site/"}) {
    INFO(t);
    CHECK(f.get(t).status == 400);
  }
  // Decoded once: "%252e%252e" is the literal name "%2e%2e", which this site happens to contain.
  auto lit = f.get("/a/site/%252e%252e");
  CHECK(lit.status == 200);
  CHECK(file_text(lit) == "literal percent name\n");
  CHECK(f.get("/a/site/%252e%252e/etc/passwd").status == 404);
  CHECK(f.get("/a/site/etc/passwd").status == 404);
  CHECK(f.get("/a/site/%2Fetc%2Fpasswd").status == 400);
}

TEST_CASE("healthz tells the state dir only to local clients") {
  Fixture f;
  auto r = f.get("/healthz");
  REQUIRE(r.status == 200);
  auto j = nlohmann::json::parse(r.body);
  CHECK(j["service"] == "kiln-serve");
  CHECK(j["state_dir"] == f.ctx.state_dir);
  CHECK(j["pid"] == 4242);
  Request far;
  far.method = "GET";
  far.target = "/healthz";
  far.client = "192.0.2.7";
  auto j2 = nlohmann::json::parse(route(far, f.ctx).body);
  CHECK_FALSE(j2.contains("state_dir"));
}

TEST_CASE("password mode: 401 page and challenge, Basic, form login, cookie, redirects, rate limit") {
  Fixture f;
  f.publish("site", "secret", Share::password, "correct horse");

  auto r = f.get("/a/secret/");
  CHECK(r.status == 401);
  CHECK(hdr(r, "WWW-Authenticate") == "Basic realm=\"kiln: secret\", charset=\"UTF-8\"");
  CHECK(r.body.find("action=\"/a/secret/_kiln/login\"") != std::string::npos);
  CHECK(r.body.find("name=\"next\" value=\"/a/secret/\"") != std::string::npos);
  CHECK(hdr(r, "Cache-Control") == "no-store");
  // A browser gets the page without the challenge, so it shows the form instead of a dialog.
  auto br = f.get("/a/secret/docs/", {{"Accept", "text/html,application/xhtml+xml"}});
  CHECK(br.status == 401);
  CHECK(br.header("WWW-Authenticate") == nullptr);
  CHECK(br.body.find("value=\"/a/secret/docs/\"") != std::string::npos);

  auto ok = f.get("/a/secret/", {{"Authorization", basic("correct horse")}});
  REQUIRE(ok.status == 200);
  CHECK(hdr(ok, "Cache-Control") == "private, no-cache");
  std::string setc = hdr(ok, "Set-Cookie");
  CHECK(setc.find("HttpOnly") != std::string::npos);
  CHECK(setc.find("SameSite=Lax") != std::string::npos);
  CHECK(setc.find("Path=/a/secret/") != std::string::npos);
  CHECK(setc.find("Max-Age=") != std::string::npos);
  auto with_cookie = f.get("/a/secret/style.css", {{"Cookie", "other=1; " + cookie_pair(ok)}});
  CHECK(with_cookie.status == 200);
  CHECK(f.get("/a/secret/", {{"Cookie", "kiln_session=forged"}}).status == 401);
  auto wrong = f.get("/a/secret/", {{"Authorization", basic("nope")}});
  CHECK(wrong.status == 401);
  CHECK(wrong.body.find("not right") != std::string::npos);

  auto login = f.post_login("secret", "password=correct+horse&next=%2Fa%2Fsecret%2Fdocs%2F");
  REQUIRE(login.status == 303);
  CHECK(hdr(login, "Location") == "/a/secret/docs/");
  CHECK(f.get("/a/secret/docs/", {{"Cookie", cookie_pair(login)}}).status == 200);
  auto evil = f.post_login("secret", "password=correct+horse&next=https%3A%2F%2Fevil.example%2F");
  CHECK(hdr(evil, "Location") == "/a/secret/");
  auto bad = f.post_login("secret", "password=wrong&next=%2Fa%2Fsecret%2F", "10.0.0.9");
  CHECK(bad.status == 401);
  CHECK(bad.body.find("not right") != std::string::npos);
  CHECK(f.get("/a/secret/_kiln/login", {{"Content-Type", "text/plain"}, {"Body", "password=x"}}, "POST").status == 415);
  CHECK(f.get("/a/secret/_kiln/login?next=/a/secret/x").status == 200);
  CHECK(hdr(f.get("/a/secret/_kiln/logout"), "Set-Cookie").find("Max-Age=0") != std::string::npos);

  int status = 0;
  Response limited;
  for (int i = 0; i < 30 && status != 429; ++i) {
    limited = f.post_login("secret", "password=guess" + std::to_string(i), "10.0.0.5");
    status = limited.status;
  }
  REQUIRE(status == 429);
  CHECK(std::stoi(hdr(limited, "Retry-After")) >= 1);
  // Per client: another address can still log in.
  CHECK(f.post_login("secret", "password=correct+horse", "10.0.0.6").status == 303);
}

TEST_CASE("a login cookie's Max-Age is the lifetime the server enforces, no longer") {
  Fixture f;
  std::int64_t now = 1'900'000'000;
  f.store->set_clock([&now] { return now; });
  f.publish("site", "secret", Share::password, "correct horse");
  auto ok = f.get("/a/secret/", {{"Authorization", basic("correct horse")}});
  REQUIRE(ok.status == 200);
  std::string setc = hdr(ok, "Set-Cookie");
  CHECK_MESSAGE(setc.find(fmt::format("Max-Age={};", kPasswordCookieS)) != std::string::npos, setc);
  auto login = f.post_login("secret", "password=correct+horse&next=%2Fa%2Fsecret%2F");
  REQUIRE(login.status == 303);
  CHECK_MESSAGE(hdr(login, "Set-Cookie").find(fmt::format("Max-Age={};", kPasswordCookieS)) != std::string::npos,
                hdr(login, "Set-Cookie"));
  // The server's side of the same lifetime: taken just before it ends, refused after.
  now += kPasswordCookieS - 60;
  CHECK(f.get("/a/secret/", {{"Cookie", cookie_pair(ok)}}).status == 200);
  now += 120;
  CHECK(f.get("/a/secret/", {{"Cookie", cookie_pair(ok)}}).status == 401);
}

TEST_CASE("invite mode: token -> redirect + cookie, revoke, unknown token; the log never holds secrets") {
  std::ostringstream log;
  auto old = spdlog::default_logger();
  auto logger = std::make_shared<spdlog::logger>("test", std::make_shared<spdlog::sinks::ostream_sink_mt>(log));
  spdlog::set_default_logger(logger);
  {
    Fixture f;
    auto pub = f.publish("site", "shared", Share::invite, "", {"alice", "bob"});
    REQUIRE(pub.new_invites.size() == 2);
    std::string alice = pub.new_invites[0].name == "alice" ? pub.new_invites[0].token : pub.new_invites[1].token;
    std::string bob = pub.new_invites[0].name == "bob" ? pub.new_invites[0].token : pub.new_invites[1].token;

    CHECK(f.get("/a/shared/").status == 403);
    CHECK(f.get("/a/shared/?invite=not-a-token").status == 403);
    auto r = f.get("/a/shared/docs/?x=1&invite=" + alice);
    REQUIRE(r.status == 303);
    CHECK(hdr(r, "Location") == "/a/shared/docs/?x=1");
    std::string cookie = cookie_pair(r);
    CHECK(f.get("/a/shared/docs/", {{"Cookie", cookie}}).status == 200);

    kiln::artifacts::ShareRequest revoke;
    revoke.name = "shared";
    revoke.revoke = {"alice"};
    REQUIRE(f.store->share(revoke).has_value());
    CHECK(f.get("/a/shared/", {{"Cookie", cookie}}).status == 403);
    CHECK(f.get("/a/shared/?invite=" + alice).status == 403);
    CHECK(f.get("/a/shared/?invite=" + bob).status == 303);

    f.publish("site", "pw", Share::password, "s3cret-pass");
    f.get("/a/pw/", {{"Authorization", basic("s3cret-pass")}});
    f.post_login("pw", "password=s3cret-pass");
    spdlog::default_logger()->flush();
    std::string text = log.str();
    CHECK(text.find("artifact=shared") != std::string::npos);
    CHECK(text.find("outcome=denied") != std::string::npos);
    CHECK(text.find("share=invite") != std::string::npos);
    CHECK(text.find(alice) == std::string::npos);
    CHECK(text.find(bob) == std::string::npos);
    CHECK(text.find("s3cret-pass") == std::string::npos);
    CHECK(text.find(cookie.substr(cookie.find('=') + 1)) == std::string::npos);
  }
  spdlog::set_default_logger(old);
}

TEST_CASE("an expired share answers 410 (or 403), never the files") {
  Fixture f;
  f.publish("site", "brief", Share::public_, "", {}, 1);
  CHECK(f.get("/a/brief/").status == 200);
  std::this_thread::sleep_for(std::chrono::milliseconds(2100));
  int s = f.get("/a/brief/").status;
  CHECK((s == 410 || s == 403));
}

TEST_CASE("the serving cache answers repeats, and the next request after a publish or share change sees it") {
  Fixture f;
  // A long expiry, so what the test sees is the change signal at work, not the clock.
  kiln::server::http::ServeCache cache(f.ctx.state_dir, "artifacts.db", std::chrono::seconds(60));
  f.ctx.cache = &cache;
  f.publish("site", "site", Share::public_);
  auto first = f.get("/a/site/");
  REQUIRE(first.status == 200);
  auto again = f.get("/a/site/");
  CHECK(again.status == 200);
  CHECK(hdr(again, "ETag") == hdr(first, "ETag"));
  CHECK(hdr(again, "Cache-Control") == "no-cache");
  CHECK(f.get("/a/site/v/1/").status == 200);
  CHECK(hdr(f.get("/a/site/v/1/"), "Cache-Control") == "public, max-age=31536000, immutable");

  REQUIRE(cache.watch_fd() >= 0);
  f.write("ws/site/index.html", "<h1>second</h1>\n");
  f.publish("site", "site", Share::public_);
  // No event loop runs here: the very next request must see the change by itself.
  CHECK(file_text(f.get("/a/site/")) == "<h1>second</h1>\n");
  CHECK(file_text(f.get("/a/site/v/1/")) == f.index_html);

  kiln::artifacts::ShareRequest lock;
  lock.name = "site";
  lock.share = Share::password;
  lock.password = "now private";
  REQUIRE(f.store->share(lock).has_value());
  CHECK(f.get("/a/site/").status == 401);
  CHECK(f.get("/a/site/v/1/").status == 401);
  CHECK(f.get("/a/site/", {{"Authorization", basic("now private")}}).status == 200);
  CHECK(f.get("/a/site/").status == 401);  // a credentialed answer is never cached for others
}

TEST_CASE("protected pages from the access rules in memory: a new password, a revoke, a mode change or an unpublish ends the old cookie at once") {
  Fixture f;
  std::int64_t now = 1'900'000'000;
  f.store->set_clock([&now] { return now; });
  // A long expiry, so only the change signal (and the clock, for expiries) can end a kept answer.
  kiln::server::http::ServeCache cache(f.ctx.state_dir, "artifacts.db", std::chrono::seconds(600));
  REQUIRE(cache.watch_fd() >= 0);
  f.ctx.cache = &cache;
  f.publish("site", "secret", Share::password, "correct horse");
  auto pub = f.publish("site", "shared", Share::invite, "", {"alice", "bob"});
  auto token = [&](const std::string& name) {
    for (const auto& i : pub.new_invites)
      if (i.name == name) return i.token;
    return std::string();
  };

  auto login = f.post_login("secret", "password=correct+horse&next=%2Fa%2Fsecret%2F");
  REQUIRE(login.status == 303);
  const std::string pw = cookie_pair(login);
  // Asked twice: the second answer comes from the rules the first one kept.
  CHECK(f.get("/a/secret/", {{"Cookie", pw}}).status == 200);
  CHECK(f.get("/a/secret/style.css", {{"Cookie", pw}}).status == 200);
  CHECK(f.get("/a/secret/v/1/", {{"Cookie", pw}}).status == 200);
  CHECK(f.get("/a/secret/v/2/", {{"Cookie", pw}}).status == 404);
  CHECK(f.get("/a/secret/", {{"Cookie", "kiln_session=forged"}}).status == 401);
  CHECK(f.get("/a/shared/", {{"Cookie", pw}}).status == 403);  // another artifact's cookie

  auto a = f.get("/a/shared/?invite=" + token("alice"));
  auto b = f.get("/a/shared/?invite=" + token("bob"));
  REQUIRE(a.status == 303);
  REQUIRE(b.status == 303);
  const std::string alice = cookie_pair(a), bob = cookie_pair(b);
  CHECK(f.get("/a/shared/", {{"Cookie", alice}}).status == 200);
  CHECK(f.get("/a/shared/", {{"Cookie", bob}}).status == 200);

  // A revoke is a database change: the very next request with the old cookie is refused.
  kiln::artifacts::ShareRequest revoke;
  revoke.name = "shared";
  revoke.revoke = {"alice"};
  REQUIRE(f.store->share(revoke).has_value());
  CHECK(f.get("/a/shared/", {{"Cookie", alice}}).status == 403);
  CHECK(f.get("/a/shared/", {{"Cookie", bob}}).status == 200);

  // So is a new password.
  kiln::artifacts::ShareRequest repass;
  repass.name = "secret";
  repass.password = "battery staple";
  REQUIRE(f.store->share(repass).has_value());
  CHECK(f.get("/a/secret/", {{"Cookie", pw}}).status == 401);
  auto relogin = f.post_login("secret", "password=battery+staple&next=%2Fa%2Fsecret%2F");
  REQUIRE(relogin.status == 303);
  const std::string pw2 = cookie_pair(relogin);
  CHECK(f.get("/a/secret/", {{"Cookie", pw2}}).status == 200);

  // Time passes without any database change: the artifact's expiry and the login's lifetime
  // are checked against the clock on every request, kept rules or not.
  kiln::artifacts::ShareRequest expire;
  expire.name = "secret";
  expire.expires_in_s = 30;
  REQUIRE(f.store->share(expire).has_value());
  CHECK(f.get("/a/secret/", {{"Cookie", pw2}}).status == 200);
  now += 31;
  CHECK(f.get("/a/secret/", {{"Cookie", pw2}}).status == 410);
  expire.expires_in_s = 0;
  REQUIRE(f.store->share(expire).has_value());
  CHECK(f.get("/a/secret/", {{"Cookie", pw2}}).status == 200);
  now += kPasswordCookieS;
  CHECK(f.get("/a/secret/", {{"Cookie", pw2}}).status == 401);

  // A mode change ends every cookie of the old mode; an unpublish ends everything.
  CHECK(f.get("/a/shared/", {{"Cookie", bob}}).status == 200);
  kiln::artifacts::ShareRequest to_password;
  to_password.name = "shared";
  to_password.share = Share::password;
  to_password.password = "pw for shared";
  REQUIRE(f.store->share(to_password).has_value());
  CHECK(f.get("/a/shared/", {{"Cookie", bob}}).status == 401);
  auto third = f.post_login("shared", "password=pw+for+shared&next=%2Fa%2Fshared%2F");
  REQUIRE(third.status == 303);
  CHECK(f.get("/a/shared/", {{"Cookie", cookie_pair(third)}}).status == 200);
  REQUIRE(f.store->unpublish("shared", std::nullopt).has_value());
  CHECK(f.get("/a/shared/", {{"Cookie", cookie_pair(third)}}).status == 404);
}

TEST_CASE("an app's files are its source: the router never serves them as pages, not even before the front door knows it") {
  Fixture f;
  f.write("ws/site/server.js", "secret source\n");
  const nlohmann::json app = {{"app", {{"argv", {"node", "server.js"}}}}, {"services", nlohmann::json::array()}};
  f.publish("site", "tracker", Share::public_, "", {}, std::nullopt, app);
  for (const char* target : {"/a/tracker/", "/a/tracker/server.js", "/a/tracker/index.html", "/a/tracker/v/1/server.js",
                             "/a/tracker/about", "/a/tracker/missing"}) {
    CAPTURE(target);
    auto r = f.get(target);
    CHECK(r.status == 404);
    CHECK(r.file_path.empty());
    CHECK(r.body.find("secret source") == std::string::npos);
  }
  // A static version beside it stays a page.
  f.publish("site", "plainsite", Share::public_);
  CHECK(f.get("/a/plainsite/server.js").status == 200);
}
