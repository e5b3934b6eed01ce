// The proxy's other paths over real sockets: answers of the route's own, Expect: 100-continue, a
// 101 tunnel, upstream failures (502, 504), a hung upstream beside a working one, clients leaving,
// eviction, late and missing decisions, and shutdown.
#include <doctest/doctest.h>

#include "proxy_fixture.h"

TEST_CASE("proxy: an answer decision goes out as is and its body never reaches the upstream") {
  Proxy p;
  Wire c(dial(p.server->port()));
  auto bare = roundtrip(c, get("/a/answer/x"));
  REQUIRE(bare);
  CHECK(bare->status() == 403);
  CHECK(bare->body == "no entry");
  // Without a body the connection goes on; with one, the rest is drained and the connection closes.
  std::string body(1 << 20, 'S');
  auto refused = roundtrip(c, fmt::format("POST /a/answer/x HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n{}",
                                         body.size(), body));
  REQUIRE(refused);
  CHECK(refused->status() == 403);
  CHECK(refused->get("connection") == "close");
  CHECK(p.app.connections == 0);
  CHECK(p.app.body_bytes_in == 0);
}

TEST_CASE("proxy: Expect: 100-continue is answered by the proxy, then the body goes up") {
  Proxy p;
  Wire c(dial(p.server->port()));
  REQUIRE(c.send("POST /a/app/hello HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n"));
  auto cont = read_head(c);
  REQUIRE(cont);
  CHECK(cont->status() == 100);
  REQUIRE(c.send("12345"));
  auto r = read_response(c);
  REQUIRE(r);
  CHECK(r->body == "hello /hello body=12345");
  auto seen = p.app.seen();
  REQUIRE(seen.size() == 1);
  CHECK_FALSE(seen[0].has("expect"));
  CHECK(seen[0].get("content-length") == "5");
}

TEST_CASE("proxy: a 101 upgrade pipes bytes both ways until the client closes") {
  Proxy p;
  {
    Wire c(dial(p.server->port()));
    // Bytes right behind the head, and bytes right behind the upstream's 101, must both get through.
    REQUIRE(c.send(get("/a/app/ws", "Upgrade: websocket\r\nConnection: Upgrade\r\n") + "EARLY"));
    auto head = read_head(c);
    REQUIRE(head);
    CHECK(head->status() == 101);
    CHECK(head->get("upgrade") == "websocket");
    CHECK(head->get("connection") == "Upgrade");
    std::string got;
    REQUIRE(c.exact(10, [&](std::string_view s) { got += s; }));
    CHECK(got == "HELLOEARLY");
    REQUIRE(c.send("ping-1"));
    got.clear();
    REQUIRE(c.exact(6, [&](std::string_view s) { got += s; }));
    CHECK(got == "ping-1");
    auto seen = p.app.seen();
    REQUIRE(seen.size() == 1);
    CHECK(seen[0].get("upgrade") == "websocket");
    CHECK(seen[0].get("connection") == "Upgrade");
  }
  REQUIRE(p.wait_outcomes(1));
  CHECK(p.outcomes[0].upgraded);
  CHECK(p.outcomes[0].status == 101);
  CHECK(p.outcomes[0].request_bytes == 11);
}

TEST_CASE("proxy: a refused upstream is a 502 and the connection goes on") {
  Proxy p;
  Wire c(dial(p.server->port()));
  auto r = roundtrip(c, get("/a/refused/x"));
  REQUIRE(r);
  CHECK(r->status() == 502);
  CHECK(r->get("content-type").starts_with("text/plain"));
  CHECK(r->body.size() < 200);
  REQUIRE(p.wait_outcomes(1));
  CHECK(p.outcomes[0].upstream_failed);
  CHECK(p.outcomes[0].status == 502);
  auto next = roundtrip(c, get("/a/app/hello"));
  REQUIRE(next);
  CHECK(next->status() == 200);
}

TEST_CASE("proxy: an upstream that never answers is a 504 after response_timeout") {
  Proxy p;
  p.response_timeout = 1s;
  Wire c(dial(p.server->port()));
  auto r = roundtrip(c, get("/a/app/hang"));
  REQUIRE(r);
  CHECK(r->status() == 504);
  REQUIRE(p.wait_outcomes(1));
  CHECK(p.outcomes[0].upstream_failed);
  CHECK(p.outcomes[0].status == 504);
}

TEST_CASE("proxy: a hung upstream blocks nobody else; its client leaving ends it, done once") {
  Proxy p;  // one io thread
  auto hung = std::make_unique<Wire>(dial(p.server->port()));
  REQUIRE(hung->send(get("/a/app/hang")));
  while (p.app.seen().empty()) std::this_thread::sleep_for(10ms);
  Wire other(dial(p.server->port()));
  auto r = roundtrip(other, get("/a/app/hello"));
  REQUIRE(r);
  CHECK(r->body == "hello /hello");
  CHECK_FALSE(hung->readable(0));  // still waiting
  REQUIRE(p.wait_outcomes(1));  // the other exchange
  hung.reset();                 // the client gives up
  REQUIRE(p.wait_outcomes(2));
  std::lock_guard lock(p.mu);
  CHECK(p.outcomes[1].status == 0);  // nothing went out to it
}

TEST_CASE("proxy: a client leaving mid-download ends the exchange and the upstream, done once") {
  Proxy p;
  {
    Wire c(dial(p.server->port()));
    REQUIRE(c.send(get("/a/app/infinite")));
    auto head = read_head(c);
    REQUIRE(head);
    std::uint64_t got = 0;
    while (got < (1u << 20) && c.fill()) {
      got += c.buf.size();
      c.buf.clear();
    }
  }
  REQUIRE(p.wait_outcomes(1));
  for (int i = 0; i < 3000 && !p.app.infinite_ended; ++i) std::this_thread::sleep_for(10ms);
  CHECK(p.app.infinite_ended);  // the proxy closed its side to the upstream
  std::this_thread::sleep_for(200ms);
  CHECK(p.outcome_count() == 1);
  CHECK(p.outcomes[0].status == 200);
  CHECK_FALSE(p.outcomes[0].reusable);
}

TEST_CASE("proxy: a connection streaming a proxied body is never the one evicted") {
  Proxy p([](ServerOptions& o) { o.max_connections = 2; });
  Wire upload(dial(p.server->port()));
  REQUIRE(upload.send("POST /a/app/upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"));
  std::string piece(1000, 'u');
  REQUIRE(upload.send(fmt::format("{:x}\r\n{}\r\n", piece.size(), piece)));
  while (p.app.body_bytes_in < piece.size()) std::this_thread::sleep_for(10ms);
  Wire idle(dial(p.server->port()));  // waits for a head, after the upload started
  std::this_thread::sleep_for(100ms);
  Wire third(dial(p.server->port()));  // at the cap: the one waiting for a head must go
  REQUIRE(idle.readable(10000));
  CHECK_FALSE(idle.fill());  // closed
  REQUIRE(upload.send(fmt::format("{:x}\r\n{}\r\n0\r\n\r\n", piece.size(), piece)));
  auto r = read_response(upload);
  REQUIRE(r);
  CHECK(r->body.starts_with("got 2000 "));
  auto t = roundtrip(third, get("/a/app/hello"));
  REQUIRE(t);
  CHECK(t->status() == 200);
}

TEST_CASE("proxy: a decision may come later from another thread; none at all is a 504") {
  Proxy p([](ServerOptions& o) { o.proxy->decide_timeout = std::chrono::seconds(1); });
  Wire c(dial(p.server->port()));
  auto late = roundtrip(c, get("/a/later/hello"));
  REQUIRE(late);
  CHECK(late->body == "hello /hello");
  auto never = roundtrip(c, get("/a/never/hello"));
  REQUIRE(never);
  CHECK(never->status() == 504);
}

TEST_CASE("proxy: shutdown cuts a proxied exchange after the grace and still reports it once") {
  Proxy p([](ServerOptions& o) { o.shutdown_grace = std::chrono::seconds(1); });
  Wire c(dial(p.server->port()));
  REQUIRE(c.send(get("/a/app/hang")));
  while (p.app.seen().empty()) std::this_thread::sleep_for(10ms);
  p.stop();  // returns once run() has and the server is gone
  CHECK(p.outcome_count() == 1);
}

TEST_CASE("proxy: requests it does not claim keep the listener's body limit") {
  Proxy p;
  Wire c(dial(p.server->port()));
  auto r = roundtrip(c, fmt::format("POST /other HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n{}", 10000,
                                   std::string(10000, 'b')));
  REQUIRE(r);
  CHECK(r->status() == 413);
}
