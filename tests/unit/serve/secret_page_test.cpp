// The one-time secret pages without sockets: the endpoint's handler and screen on plain requests,
// against a real secret store in a temp state directory and a clock the test moves. Who may post
// (this machine, this server's own page), what a page takes (once, non-empty, within 15 minutes)
// and what the log learns (the name and 8 characters of the token, never the value).
#include <doctest/doctest.h>

#include <sys/stat.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <vector>

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include "sandbox/secrets.h"
#include "serve/secret_page.h"
#include "../temp_dir.h"

using namespace kiln::server;
using kiln::Errc;
using secrets::SecretRequests;

namespace {

constexpr const char* kBase = "http://127.0.0.1:7700";

struct Pages {
  kiln::test::TempDir dir{"kiln-secret-page"};
  std::chrono::steady_clock::time_point now = std::chrono::steady_clock::time_point{} + std::chrono::hours(1);
  SecretRequests requests{dir.path, [this] { return now; }};
  http::Endpoint endpoint = secrets::secret_page_endpoint(requests);

  Pages() { requests.set_base_url(kBase); }

  std::string issue(const std::string& name = "NPM_TOKEN") {
    auto p = requests.issue(name);
    REQUIRE(p);
    REQUIRE(p->url.starts_with(std::string(kBase) + "/_kiln/secret/"));
    return p->url.substr(std::string(kBase).size());
  }
  static http::Request req(const std::string& method, const std::string& target) {
    http::Request r;
    r.method = method;
    r.target = target;
    r.host = "127.0.0.1:7700";
    r.client = "127.0.0.1";
    r.client_is_local = true;
    if (method == "POST") r.content_type = "application/x-www-form-urlencoded";
    return r;
  }
  static http::Request post(const std::string& target, const std::string& body) {
    http::Request r = req("POST", target);
    r.body = body;
    r.headers["origin"] = "http://127.0.0.1:7700";
    return r;
  }
  http::Response call(http::Request r) { return endpoint.handler(std::move(r)); }
  std::string stored(const std::string& name = "NPM_TOKEN") {
    std::ifstream in(dir.path + "/secrets/" + name);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  bool has_secret(const std::string& name = "NPM_TOKEN") {
    struct stat st {};
    return ::stat((dir.path + "/secrets/" + name).c_str(), &st) == 0;
  }
};

std::string header(const http::Response& r, const char* name) {
  const std::string* v = r.header(name);
  return v ? *v : std::string();
}

}  // namespace

TEST_CASE("a page is issued for a secret name only, with a one-time URL of 64 hex characters") {
  Pages p;
  for (std::string bad : std::vector<std::string>{"", "1ABC", "NPM-TOKEN", "A B", "X;rm", std::string(129, 'A'), "ÄRGER"}) {
    auto r = p.requests.issue(bad);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == Errc::invalid_argument);
    CHECK(r.error().message.find("secret name") != std::string::npos);
  }
  auto a = p.requests.issue("NPM_TOKEN");
  auto b = p.requests.issue("NPM_TOKEN");
  REQUIRE(a);
  REQUIRE(b);
  CHECK(a->expires_in_s == 900);
  CHECK(a->name == "NPM_TOKEN");
  std::string token = a->url.substr(std::string(kBase).size() + std::string("/_kiln/secret/").size());
  CHECK(token.size() == 64);
  CHECK(token.find_first_not_of("0123456789abcdef") == std::string::npos);
  CHECK(a->url != b->url);
  CHECK(p.requests.outstanding() == 2);

  SecretRequests unbound(p.dir.path);
  auto early = unbound.issue("NPM_TOKEN");
  REQUIRE_FALSE(early);
  CHECK(early.error().code == Errc::unsupported);
}

TEST_CASE("the page asks for the value with the strict headers, and takes it once") {
  Pages p;
  std::string path = p.issue();
  auto form = p.call(Pages::req("GET", path));
  CHECK(form.status == 200);
  CHECK(form.body.find("NPM_TOKEN") != std::string::npos);
  CHECK(form.body.find("type=\"password\"") != std::string::npos);
  CHECK(form.body.find("never shown to the assistant") != std::string::npos);
  CHECK(form.body.find("<script") == std::string::npos);
  CHECK(header(form, "Cache-Control") == "no-store");
  CHECK(header(form, "Referrer-Policy") == "same-origin");
  CHECK(header(form, "X-Frame-Options") == "DENY");
  CHECK(header(form, "X-Content-Type-Options") == "nosniff");
  CHECK(header(form, "Content-Security-Policy").find("default-src 'none'") != std::string::npos);
  CHECK(header(form, "Content-Security-Policy").find("form-action 'self'") != std::string::npos);
  CHECK(p.call(Pages::req("HEAD", path)).head);

  auto done = p.call(Pages::post(path, "value=s3cr3t%2Bvalue%26more"));
  CHECK(done.status == 200);
  CHECK(done.body.find("Stored NPM_TOKEN") != std::string::npos);
  CHECK(done.body.find("s3cr3t") == std::string::npos);
  CHECK(header(done, "Cache-Control") == "no-store");
  CHECK(p.stored() == "s3cr3t+value&more");
  struct stat st {};
  REQUIRE(::stat((p.dir.path + "/secrets/NPM_TOKEN").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);

  CHECK(p.call(Pages::req("GET", path)).status == 404);
  auto again = p.call(Pages::post(path, "value=other"));
  CHECK(again.status == 404);
  CHECK(again.body.find("Ask the assistant again") != std::string::npos);
  CHECK(p.stored() == "s3cr3t+value&more");
  CHECK(p.requests.outstanding() == 0);
}

TEST_CASE("an empty value or a NUL is refused and the page stays usable") {
  Pages p;
  std::string path = p.issue();
  auto empty = p.call(Pages::post(path, "value="));
  CHECK(empty.status == 400);
  CHECK(empty.body.find("type=\"password\"") != std::string::npos);
  CHECK(p.call(Pages::post(path, "other=1")).status == 400);
  CHECK(p.call(Pages::post(path, "value=a%00b")).status == 400);
  auto json = Pages::post(path, "{\"value\":\"x\"}");
  json.content_type = "application/json";
  CHECK(p.call(json).status == 415);
  CHECK_FALSE(p.has_secret());
  CHECK(p.call(Pages::post(path, "value=ok")).status == 200);
  CHECK(p.stored() == "ok");
}

TEST_CASE("posts from another site, another host name or another machine are refused before the body is read") {
  Pages p;
  std::string path = p.issue();
  auto cross = Pages::post(path, "value=evil");
  cross.headers["origin"] = "http://evil.example";
  CHECK(p.call(cross).status == 403);
  REQUIRE(p.endpoint.screen);
  auto screened = p.endpoint.screen(cross);
  REQUIRE(screened);
  CHECK(screened->status == 403);

  auto site = Pages::post(path, "value=evil");
  site.headers.erase("origin");
  site.headers["sec-fetch-site"] = "cross-site";
  CHECK(p.call(site).status == 403);

  // DNS rebinding: Origin and Host agree, but the name is the attacker's.
  auto rebound = Pages::post(path, "value=evil");
  rebound.host = "evil.example:7700";
  rebound.headers["origin"] = "http://evil.example:7700";
  CHECK(p.call(rebound).status == 403);

  auto remote = Pages::post(path, "value=evil");
  remote.client_is_local = false;
  remote.client = "192.0.2.7";
  CHECK(p.call(remote).status == 403);
  auto relayed = Pages::post(path, "value=evil");
  relayed.headers["x-forwarded-for"] = "192.0.2.7";
  CHECK(p.call(relayed).status == 403);
  CHECK_FALSE(p.has_secret());

  // The same server under another loopback name, and a post without Origin (curl), are fine.
  auto local_name = Pages::post(path, "value=fine");
  local_name.host = "localhost:7700";
  local_name.headers["origin"] = "http://localhost:7700";
  local_name.headers["sec-fetch-site"] = "same-origin";
  CHECK_FALSE(p.endpoint.screen(local_name));
  CHECK(p.call(local_name).status == 200);
  CHECK(p.stored() == "fine");

  std::string other = p.issue("OTHER");
  auto bare = Pages::post(other, "value=curl");
  bare.headers.erase("origin");
  CHECK(p.call(bare).status == 200);
  CHECK(p.stored("OTHER") == "curl");
}

TEST_CASE("unknown or malformed tokens, other methods") {
  Pages p;
  std::string path = p.issue();
  std::string token = path.substr(std::string("/_kiln/secret/").size());
  std::string upper = token;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (const std::string& t : std::vector<std::string>{"/_kiln/secret/", "/_kiln/secret/" + std::string(64, 'a'), "/_kiln/secret/" + upper,
                        path + "/", path + "x", "/_kiln/secret/../apps"}) {
    CHECK(p.call(Pages::req("GET", t)).status == 404);
  }
  CHECK(p.call(Pages::req("GET", path + "?from=mail")).status == 200);
  auto del = p.call(Pages::req("DELETE", path));
  CHECK(del.status == 405);
  CHECK(header(del, "Allow") == "GET, HEAD, POST");
}

TEST_CASE("a page expires after 15 minutes, and at most 64 are outstanding") {
  Pages p;
  std::string path = p.issue();
  p.now += std::chrono::seconds(899);
  CHECK(p.call(Pages::req("GET", path)).status == 200);
  p.now += std::chrono::seconds(1);
  CHECK(p.call(Pages::req("GET", path)).status == 404);
  CHECK(p.call(Pages::post(path, "value=late")).status == 404);
  CHECK_FALSE(p.has_secret());

  std::string first = p.issue("FIRST");
  for (int i = 0; i < 64; ++i) {
    p.now += std::chrono::milliseconds(1);
    p.issue("N" + std::to_string(i));
  }
  CHECK(p.requests.outstanding() == 64);
  CHECK(p.call(Pages::req("GET", first)).status == 404);
}

TEST_CASE("the log names the secret and 8 characters of the token, never the value or the whole token") {
  Pages p;
  std::ostringstream log;
  auto old = spdlog::default_logger();
  spdlog::set_default_logger(std::make_shared<spdlog::logger>("test", std::make_shared<spdlog::sinks::ostream_sink_mt>(log)));
  std::string path = p.issue("DEPLOY_KEY");
  std::string token = path.substr(std::string("/_kiln/secret/").size());
  CHECK(p.call(Pages::post(path, "value=")).status == 400);
  CHECK(p.call(Pages::post(path, "value=v4lue-in-the-log%3F")).status == 200);
  CHECK(p.call(Pages::post(path, "value=second-try")).status == 404);
  spdlog::default_logger()->flush();
  spdlog::set_default_logger(old);
  const std::string text = log.str();
  CHECK(text.find("DEPLOY_KEY") != std::string::npos);
  CHECK(text.find(token.substr(0, 8)) != std::string::npos);
  CHECK(text.find(token.substr(0, 9)) == std::string::npos);
  CHECK(text.find("v4lue") == std::string::npos);
  CHECK(text.find("second-try") == std::string::npos);
}
