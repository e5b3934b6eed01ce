// The Streamable HTTP transport without a socket: the header rules one by one, SSE numbering and
// replay, and the /mcp endpoint driven in-process (sessions, routing, resumption, expiry), so a
// broken rule shows here before the end-to-end tests run it over real HTTP.
#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <thread>

#include "mcp/http/transport.h"
#include "mcp/http/rules.h"
#include "mcp/http/stream.h"
#include "mcp/tool_registry.h"
#include "tools/tools.h"
#include "workspace/state_store.h"
#include "../temp_dir.h"

using nlohmann::json;
using namespace kiln;
using namespace kiln::server::mcp_http;
using namespace std::chrono_literals;

namespace {

// A connection's body as the producer sees it: records every write, can be made to fail.
class FakeBody final : public server::http::BodyStream {
 public:
  bool write(std::string bytes) override {
    std::lock_guard lock(mu_);
    if (ended_ || broken_) return false;
    text_ += bytes;
    cv_.notify_all();
    return true;
  }
  void end() override {
    std::lock_guard lock(mu_);
    ended_ = true;
    cv_.notify_all();
  }
  void breaks() {
    std::lock_guard lock(mu_);
    broken_ = true;
  }
  std::string text() {
    std::lock_guard lock(mu_);
    return text_;
  }
  bool ended() {
    std::lock_guard lock(mu_);
    return ended_;
  }
  bool wait_for(const std::string& needle, std::chrono::milliseconds timeout = 5s) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return text_.find(needle) != std::string::npos; });
  }
  bool wait_end(std::chrono::milliseconds timeout = 5s) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return ended_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::string text_;
  bool ended_ = false;
  bool broken_ = false;
};

std::vector<std::string> data_lines(const std::string& sse) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  while ((pos = sse.find("data: ", pos)) != std::string::npos) {
    auto nl = sse.find('\n', pos);
    std::string d = sse.substr(pos + 6, nl - pos - 6);
    if (!d.empty()) out.push_back(d);
    pos = nl;
  }
  return out;
}

}  // namespace

TEST_CASE("Accept must name both media types explicitly") {
  CHECK(accepts("application/json, text/event-stream", "application/json"));
  CHECK(accepts("application/json, text/event-stream", "text/event-stream"));
  CHECK(accepts("Text/Event-Stream;q=0.5", "text/event-stream"));
  CHECK_FALSE(accepts("*/*", "application/json"));
  CHECK_FALSE(accepts("text/*", "text/event-stream"));
  CHECK_FALSE(accepts("application/json, text/event-stream;q=0", "text/event-stream"));
  CHECK_FALSE(accepts("", "application/json"));
  CHECK_FALSE(accepts("application/jsonx", "application/json"));
}

TEST_CASE("Content-Type must be JSON in UTF-8") {
  CHECK(is_json_content_type("application/json"));
  CHECK(is_json_content_type("Application/JSON; charset=UTF-8"));
  CHECK(is_json_content_type("application/json;charset=\"utf-8\""));
  CHECK_FALSE(is_json_content_type("application/json; charset=latin1"));
  CHECK_FALSE(is_json_content_type("text/plain"));
  CHECK_FALSE(is_json_content_type(""));
}

TEST_CASE("Host and Origin rules against DNS rebinding") {
  CHECK(is_loopback_host("127.0.0.1:7700", 7700));
  CHECK(is_loopback_host("localhost:7700", 7700));
  CHECK(is_loopback_host("LOCALHOST", 7700));
  CHECK(is_loopback_host("[::1]:7700", 7700));
  CHECK_FALSE(is_loopback_host("127.0.0.1:7701", 7700));
  CHECK_FALSE(is_loopback_host("evil.example.com:7700", 7700));
  CHECK_FALSE(is_loopback_host("localhost.evil.example.com:7700", 7700));
  CHECK_FALSE(is_loopback_host("127.0.0.1.nip.io:7700", 7700));
  CHECK_FALSE(is_loopback_host("127.0.0.1:", 7700));
  CHECK_FALSE(is_loopback_host("", 7700));

  CHECK(is_loopback_origin("http://localhost:6274"));
  CHECK(is_loopback_origin("https://127.0.0.1"));
  CHECK(is_loopback_origin("http://[::1]:3000"));
  CHECK_FALSE(is_loopback_origin("http://evil.example.com"));
  CHECK_FALSE(is_loopback_origin("http://localhost.evil.example.com"));
  CHECK_FALSE(is_loopback_origin("null"));
  CHECK_FALSE(is_loopback_origin("file://"));
  CHECK_FALSE(is_loopback_origin(""));

  CHECK(origin_matches_host("http://kiln.lan:7700", "kiln.lan:7700"));
  CHECK(origin_matches_host("https://Kiln.LAN:7700", "kiln.lan:7700"));
  CHECK_FALSE(origin_matches_host("http://kiln.lan:7701", "kiln.lan:7700"));
  CHECK_FALSE(origin_matches_host("http://evil.example.com", "kiln.lan:7700"));
}

TEST_CASE("loopback addresses") {
  CHECK(is_loopback_address("127.0.0.1"));
  CHECK(is_loopback_address("127.8.9.10"));
  CHECK(is_loopback_address("::1"));
  CHECK(is_loopback_address("::ffff:127.0.0.1"));
  CHECK_FALSE(is_loopback_address("0.0.0.0"));
  CHECK_FALSE(is_loopback_address("::"));
  CHECK_FALSE(is_loopback_address("192.168.1.2"));
  CHECK_FALSE(is_loopback_address("::ffff:10.0.0.1"));
  CHECK_FALSE(is_loopback_address("localhost"));
}

TEST_CASE("protocol versions") {
  CHECK(is_supported_protocol_version("2025-11-25"));
  CHECK(is_supported_protocol_version("2025-06-18"));
  CHECK(is_supported_protocol_version("2025-03-26"));
  CHECK_FALSE(is_supported_protocol_version("2024-11-05"));
  CHECK_FALSE(is_supported_protocol_version(""));
  CHECK(version_requires_header("2025-11-25"));
  CHECK_FALSE(version_requires_header("2025-03-26"));
}

TEST_CASE("bearer tokens: loading and constant-time checks") {
  std::string a(40, 'a'), b = "0123456789abcdef0123456789abcdef-xyz";
  auto set = TokenSet::from_text("# tokens\n\n" + a + "\n  " + b + "  \r\n");
  REQUIRE_MESSAGE(set.has_value(), (set ? "" : set.error().message));
  CHECK(set->size() == 2);
  CHECK(set->check("Bearer " + a));
  CHECK(set->check("bearer " + b));
  CHECK_FALSE(set->check("Bearer " + a + "x"));
  CHECK_FALSE(set->check("Basic " + a));
  CHECK_FALSE(set->check(a));
  CHECK_FALSE(set->check("Bearer "));
  CHECK_FALSE(set->check(""));
  CHECK_FALSE(TokenSet::from_text("short\n").has_value());
  CHECK_FALSE(TokenSet::from_text("# only a comment\n").has_value());
  CHECK_FALSE(TokenSet::from_text(std::string(40, 'a') + " with space\n").has_value());

  char tmpl[] = "/tmp/kiln-tokens-XXXXXX";
  int fd = ::mkstemp(tmpl);
  REQUIRE(fd >= 0);
  REQUIRE(::write(fd, a.data(), a.size()) == static_cast<ssize_t>(a.size()));
  ::close(fd);
  ::chmod(tmpl, 0644);
  auto open_to_all = TokenSet::load(tmpl);
  CHECK_FALSE(open_to_all.has_value());
  if (!open_to_all) CHECK(open_to_all.error().message.find("chmod 600") != std::string::npos);
  ::chmod(tmpl, 0600);
  CHECK(TokenSet::load(tmpl).has_value());
  ::unlink(tmpl);
}

TEST_CASE("event ids") {
  CHECK(event_id(3, 7) == "3-7");
  auto p = parse_event_id("3-7");
  REQUIRE(p);
  CHECK(p->first == 3);
  CHECK(p->second == 7);
  CHECK_FALSE(parse_event_id("3"));
  CHECK_FALSE(parse_event_id("-7"));
  CHECK_FALSE(parse_event_id("3-"));
  CHECK_FALSE(parse_event_id("3-7x"));
  CHECK_FALSE(parse_event_id("a-b"));
}

TEST_CASE("an event stream primes, replays after a drop and ends after the response") {
  EventStream s(4, {});
  s.push(R"({"n":1})");  // before any connection: kept
  auto first = std::make_shared<FakeBody>();
  s.attach(first, std::nullopt);
  CHECK(first->text().starts_with("id: 4-0\nretry: 1000\ndata: \n\n"));
  CHECK(first->text().find("id: 4-1\ndata: {\"n\":1}\n\n") != std::string::npos);
  s.push(R"({"n":2})");
  first->breaks();  // the connection dies: this event is not delivered
  s.push(R"({"n":3})");
  CHECK_FALSE(s.attached());
  CHECK(s.knows(2));
  CHECK_FALSE(s.knows(9));

  auto second = std::make_shared<FakeBody>();
  s.attach(second, 1);  // Last-Event-ID 4-1
  CHECK(second->text().starts_with("id: 4-1\n"));
  CHECK(data_lines(second->text()) == std::vector<std::string>{R"({"n":2})", R"({"n":3})"});
  s.push(R"({"result":{}})");
  s.finish();
  CHECK(second->ended());

  auto late = std::make_shared<FakeBody>();  // resuming a finished stream replays and ends
  s.attach(late, 3);
  CHECK(data_lines(late->text()) == std::vector<std::string>{R"({"result":{}})"});
  CHECK(late->ended());
}

TEST_CASE("a new connection for a stream ends the previous one; the buffer keeps the newest event") {
  EventStream::Limits limits;
  limits.max_events = 2;
  EventStream s(1, limits);
  auto a = std::make_shared<FakeBody>();
  s.attach(a, std::nullopt);
  auto b = std::make_shared<FakeBody>();
  s.attach(b, std::nullopt);
  CHECK(a->ended());
  CHECK(s.attached());
  for (int i = 1; i <= 5; ++i) s.push(json{{"n", i}}.dump());
  auto c = std::make_shared<FakeBody>();
  s.attach(c, 0);
  CHECK(data_lines(c->text()) == std::vector<std::string>{R"({"n":4})", R"({"n":5})"});
}

namespace {

// A scratch folder named for these tests (tests/unit/temp_dir.h).
struct TempDir : kiln::test::TempDir {
  TempDir() : kiln::test::TempDir("kiln-mcp-http-test") {}
};

const std::string kAlice = std::string(40, 'a');
const std::string kBob = std::string(40, 'b');

struct EndpointFixture {
  TempDir state;
  std::unique_ptr<workspace::StateStore> store;
  server::ToolRegistry registry;
  std::unique_ptr<server::ServerContext> ctx;
  std::unique_ptr<Endpoint> endpoint;

  explicit EndpointFixture(Options options = {}) {
    auto opened = workspace::StateStore::open(state.path);
    REQUIRE(opened.has_value());
    store = std::move(*opened);
    server::register_workspace_tools(registry);
    ctx = std::make_unique<server::ServerContext>(server::ServerContext{*store, registry, {}});
    ctx->options.forward_process_logs = false;
    auto tokens = TokenSet::from_text("alice " + kAlice + "\nbob " + kBob + "\n");
    REQUIRE(tokens.has_value());
    endpoint = std::make_unique<Endpoint>(*ctx, options, std::move(*tokens));
    endpoint->set_listener(7700, true);
  }

  server::http::Request request(std::string method, std::string body = "", std::string session = "") {
    server::http::Request r;
    r.method = std::move(method);
    r.target = "/mcp";
    r.host = "127.0.0.1:7700";
    r.accept = "application/json, text/event-stream";
    r.content_type = "application/json";
    r.body = std::move(body);
    r.authorization = "Bearer " + kAlice;
    if (!session.empty()) {
      r.headers["mcp-session-id"] = std::move(session);
      r.headers["mcp-protocol-version"] = "2025-11-25";
    }
    return r;
  }

  std::string initialize() {
    auto r = endpoint->handle(request("POST", R"({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
      "protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}})"));
    REQUIRE(r.status == 200);
    auto sid = r.header("Mcp-Session-Id");
    REQUIRE(sid);
    CHECK(sid->size() == 64);
    CHECK(json::parse(r.body)["result"]["protocolVersion"] == "2025-11-25");
    auto n = endpoint->handle(request("POST", R"({"jsonrpc":"2.0","method":"notifications/initialized"})", *sid));
    CHECK(n.status == 202);
    return *sid;
  }

  // POSTs a request and returns the body of its SSE stream once the stream ended.
  std::shared_ptr<FakeBody> call(const std::string& session, const json& message) {
    auto r = endpoint->handle(request("POST", message.dump(), session));
    REQUIRE(r.status == 200);
    REQUIRE(r.stream_start);
    auto body = std::make_shared<FakeBody>();
    r.stream_start(body);
    CHECK(body->wait_end());
    return body;
  }
};

}  // namespace

TEST_CASE("the endpoint: sessions are separate and every status rule holds") {
  EndpointFixture f;
  std::string a = f.initialize();
  std::string b = f.initialize();
  CHECK(a != b);
  CHECK(f.endpoint->session_count() == 2);

  auto listed = f.call(a, {{"jsonrpc", "2.0"}, {"id", 1}, {"method", "tools/list"}});
  auto lines = data_lines(listed->text());
  REQUIRE(lines.size() == 1);
  CHECK(json::parse(lines[0])["result"]["tools"].is_array());

  // Same id in the other session: unrelated.
  auto pinged = f.call(b, {{"jsonrpc", "2.0"}, {"id", 1}, {"method", "ping"}});
  auto pong = data_lines(pinged->text());
  REQUIRE(pong.size() == 1);
  CHECK(json::parse(pong[0]) == json{{"jsonrpc", "2.0"}, {"id", 1}, {"result", json::object()}});

  auto status = [&](server::http::Request r) { return f.endpoint->handle(std::move(r)).status; };
  auto ping = json{{"jsonrpc", "2.0"}, {"id", 9}, {"method", "ping"}}.dump();
  CHECK(status(f.request("POST", ping)) == 400);                   // no session id
  CHECK(status(f.request("POST", ping, std::string(64, 'f'))) == 404);  // unknown session
  auto r = f.request("POST", ping, a);
  r.headers["mcp-protocol-version"] = "1999-01-01";
  CHECK(status(r) == 400);
  r = f.request("POST", ping, a);
  r.headers.erase("mcp-protocol-version");
  CHECK(status(r) == 400);  // required after 2025-06-18
  r = f.request("POST", ping, a);
  r.accept = "application/json";
  CHECK(status(r) == 406);
  r = f.request("POST", ping, a);
  r.content_type = "text/plain";
  CHECK(status(r) == 415);
  CHECK(status(f.request("POST", "[" + ping + "]", a)) == 400);  // no batches
  CHECK(status(f.request("POST", "{not json", a)) == 400);
  r = f.request("POST", ping, a);
  r.host = "evil.example.com:7700";
  CHECK(status(r) == 403);
  r = f.request("POST", ping, a);
  r.headers["origin"] = "http://evil.example.com";
  CHECK(status(r) == 403);
  r = f.request("PUT", ping, a);
  CHECK(status(r) == 405);
  r = f.request("GET", "", a);
  r.accept = "application/json";
  CHECK(status(r) == 406);
  r = f.request("GET", "", a);
  r.headers["last-event-id"] = "99-1";
  CHECK(status(r) == 400);

  CHECK(status(f.request("DELETE", "", a)) == 204);
  CHECK(status(f.request("POST", ping, a)) == 404);
  CHECK(status(f.request("DELETE", "", a)) == 404);
  CHECK(f.endpoint->session_count() == 1);
}

TEST_CASE("the endpoint: the GET stream is single, resumable, and carries what no request owns") {
  EndpointFixture f;
  std::string a = f.initialize();
  auto get = f.endpoint->handle(f.request("GET", "", a));
  REQUIRE(get.status == 200);
  auto body = std::make_shared<FakeBody>();
  get.stream_start(body);
  CHECK(body->text().starts_with("id: 0-0\n"));
  CHECK(f.endpoint->handle(f.request("GET", "", a)).status == 409);

  // The connection drops; a GET with Last-Event-ID takes the stream over (and stays single).
  body->breaks();
  get.stream_closed();
  auto again = f.request("GET", "", a);
  again.headers["last-event-id"] = "0-0";
  auto resumed = f.endpoint->handle(again);
  REQUIRE(resumed.status == 200);
  auto body2 = std::make_shared<FakeBody>();
  resumed.stream_start(body2);
  CHECK(body2->text().starts_with("id: 0-0\n"));
  CHECK(f.endpoint->handle(f.request("GET", "", a)).status == 409);
}

TEST_CASE("the endpoint: idle sessions expire and then answer 404") {
  Options o;
  o.session_idle = std::chrono::seconds(1);
  EndpointFixture f(o);
  std::string a = f.initialize();
  for (int i = 0; i < 50 && f.endpoint->session_count() > 0; ++i) std::this_thread::sleep_for(100ms);
  CHECK(f.endpoint->session_count() == 0);
  auto ping = json{{"jsonrpc", "2.0"}, {"id", 1}, {"method", "ping"}}.dump();
  CHECK(f.endpoint->handle(f.request("POST", ping, a)).status == 404);
}

TEST_CASE("the endpoint: no token, no service; another principal's session is an unknown one, byte for byte") {
  EndpointFixture f;
  auto no_token = f.request("POST", R"({"jsonrpc":"2.0","id":0,"method":"ping"})");
  no_token.authorization.clear();
  auto r = f.endpoint->handle(no_token);
  CHECK(r.status == 401);
  std::string a = f.initialize();
  auto ping = json{{"jsonrpc", "2.0"}, {"id", 9}, {"method", "ping"}}.dump();
  auto as_bob = [&](const std::string& session) {
    auto req = f.request("POST", ping, session);
    req.authorization = "Bearer " + kBob;
    return f.endpoint->handle(std::move(req));
  };
  auto theirs = as_bob(a);
  auto unknown = as_bob(std::string(64, 'f'));
  CHECK(theirs.status == 404);
  CHECK(theirs.body == unknown.body);
  auto del = f.request("DELETE", "", a);
  del.authorization = "Bearer " + kBob;
  CHECK(f.endpoint->handle(std::move(del)).status == 404);
  CHECK(f.endpoint->session_count() == 1);  // still Alice's
  auto mine = f.endpoint->handle(f.request("POST", ping, a));
  CHECK(mine.status == 200);
}

TEST_CASE("token files: NAME TOKEN lines name principals, bare tokens are named by position") {
  auto set = TokenSet::from_text("# tokens\nalice " + kAlice + "\n" + kBob + "\n\tci-bot@x  " + std::string(32, 'c') + "\n");
  REQUIRE(set.has_value());
  CHECK(set->size() == 3);
  CHECK(set->principal_for("Bearer " + kAlice) == std::optional<std::string>("alice"));
  CHECK(set->principal_for("Bearer " + kBob) == std::optional<std::string>("token-2"));
  CHECK(set->principal_for("Bearer " + std::string(32, 'c')) == std::optional<std::string>("ci-bot@x"));
  CHECK_FALSE(set->principal_for("Bearer " + std::string(40, 'z')).has_value());
  CHECK_FALSE(TokenSet::from_text("bad/name " + kAlice + "\n").has_value());
  CHECK_FALSE(TokenSet::from_text("alice short\n").has_value());
  auto one = TokenSet::single("root", kAlice);
  REQUIRE(one.has_value());
  CHECK(one->principal_for("Bearer " + kAlice) == std::optional<std::string>("root"));
}
