// The proxy with a pool of upstream sockets (mode "pooled" of the fixture) and the response-header
// rule for Kiln's own cookie, over real sockets.
#include <doctest/doctest.h>

#include "proxy_fixture.h"

TEST_CASE("proxy: a pooled socket the app closed while idle is replaced once for a GET, never for a POST") {
  Proxy p;
  Wire c(dial(p.server->port()));
  auto first = roundtrip(c, get("/a/pooled/hello-then-close"));
  REQUIRE(first);
  CHECK(first->status() == 200);
  REQUIRE(p.wait_outcomes(1));
  {
    std::lock_guard lock(p.mu);
    CHECK(p.pool.size() == 1);  // a complete keep-alive answer: the socket went back, though the app closes it
  }
  auto again = roundtrip(c, get("/a/pooled/hello"));
  REQUIRE(again);
  CHECK(again->status() == 200);
  CHECK(again->body == "hello /hello");
  CHECK(p.app.connections == 2);  // the stale socket, then one fresh connection

  auto stale = roundtrip(c, get("/a/pooled/hello-then-close"));  // on the pooled second connection
  REQUIRE(stale);
  REQUIRE(p.wait_outcomes(3));
  auto post = roundtrip(c, "POST /a/pooled/hello HTTP/1.1\r\nHost: site.test\r\nContent-Length: 0\r\n\r\n");
  REQUIRE(post);
  CHECK(post->status() == 502);  // not idempotent: the app might have acted on it once already
  CHECK(p.app.connections == 2);
  for (const auto& m : p.app.seen()) CHECK_FALSE(m.start.starts_with("POST"));
  REQUIRE(p.wait_outcomes(4));
  std::lock_guard lock(p.mu);
  CHECK(p.outcomes[1].status == 200);
  CHECK_FALSE(p.outcomes[1].upstream_failed);
  CHECK(p.outcomes[3].upstream_failed);
}

TEST_CASE("proxy: the app's Set-Cookie for a dropped name, in any case or Path, or with no name, never reaches the client") {
  Proxy p;
  Wire c(dial(p.server->port()));
  auto r = roundtrip(c, get("/a/app/cookies"));
  REQUIRE(r);
  CHECK(r->status() == 200);
  CHECK(r->body == "cookies");
  CHECK(r->get("set-cookie") == "theme=dark; Path=/");
}
