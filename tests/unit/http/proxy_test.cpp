// The listener's reverse proxy (http/proxy.h) over real sockets: a Server on 127.0.0.1:0 whose
// route sends /a/... to a real upstream (test_upstream.h), and clients on plain blocking sockets.
#include <doctest/doctest.h>

#include "proxy_fixture.h"


TEST_CASE("proxy: two GETs on one keep-alive connection, each decided, then the normal handler") {
  Proxy p;
  Wire c(dial(p.server->port()));
  auto a = roundtrip(c, get("/a/app/hello?x=1"));
  REQUIRE(a);
  CHECK(a->status() == 200);
  CHECK(a->body == "hello /hello?x=1");
  auto b = roundtrip(c, get("/a/app/hello?x=2"));
  REQUIRE(b);
  CHECK(b->body == "hello /hello?x=2");
  auto plain = roundtrip(c, get("/other"));
  REQUIRE(plain);
  CHECK(plain->body == "plain");
  CHECK(p.decides == 2);
  REQUIRE(p.wait_outcomes(2));
  std::lock_guard lock(p.mu);
  for (auto& o : p.outcomes) {
    CHECK(o.status == 200);
    CHECK_FALSE(o.upstream_failed);
    CHECK(o.response_bytes == std::string("hello /hello?x=1").size());
    CHECK(o.reusable);  // the upstream kept its connection open and the answer was complete
  }
}

TEST_CASE("proxy: hop-by-hop and dropped headers never reach the upstream, set ones do") {
  Proxy p;
  Wire c(dial(p.server->port()));
  auto r = roundtrip(c, get("/a/app/echo-headers",
                           "X-Secret: hunter2\r\nX-Kiln-User: mallory\r\nX-Kiln-Share: forged\r\n"
                           "Connection: keep-alive, X-Listed\r\nX-Listed: 1\r\nKeep-Alive: timeout=9\r\n"
                           "TE: trailers\r\nProxy-Authorization: Basic eA==\r\nUpgrade: websocket\r\n"
                           "X-Forwarded-For: 6.6.6.6\r\nX-Normal: yes\r\n"));
  REQUIRE(r);
  REQUIRE(r->status() == 200);
  auto seen = p.app.seen();
  REQUIRE(seen.size() == 1);
  const Message& up = seen[0];
  CHECK(up.start == "GET /echo-headers HTTP/1.1");
  for (const char* gone : {"x-secret", "x-kiln-share", "connection", "x-listed", "keep-alive", "te",
                           "proxy-authorization", "upgrade", "transfer-encoding"}) {
    CHECK_MESSAGE(!up.has(gone), gone);
  }
  CHECK(up.get("x-kiln-user") == "alice");
  CHECK(up.get("x-forwarded-for") == "127.0.0.1");
  CHECK(up.get("x-normal") == "yes");
  CHECK(up.get("host") == "site.test");
  // And back: the upstream's hop-by-hop fields stop at the proxy.
  CHECK(r->get("x-app") == "yes");
  CHECK_FALSE(r->has("keep-alive"));
  CHECK_FALSE(r->has("x-resp-hop"));
  CHECK_FALSE(r->has("connection"));
}

TEST_CASE("proxy: a 50 MB chunked upload streams through in bounded memory, with no body limit") {
  Proxy p;
  constexpr std::uint64_t kSize = 50ull << 20;
  std::ofstream("/proc/self/clear_refs") << "5";  // resets VmHWM to the current RSS
  std::uint64_t before = proc_status_kb("VmRSS:");
  Wire c(dial(p.server->port()));
  REQUIRE(c.send("POST /a/app/upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"));
  std::uint64_t sum = 0;
  std::string block;
  for (std::uint64_t off = 0; off < kSize;) {
    std::size_t take = static_cast<std::size_t>(std::min<std::uint64_t>(kSize - off, 50'000 + off % 30'011));
    block.resize(take);
    for (std::size_t i = 0; i < take; ++i) block[i] = pattern_at(off + i);
    sum = mix(sum, block);
    REQUIRE(c.send(fmt::format("{:x}\r\n", take)));
    REQUIRE(c.send(block));
    REQUIRE(c.send("\r\n"));
    off += take;
  }
  REQUIRE(c.send("0\r\n\r\n"));
  auto r = read_response(c);
  REQUIRE(r);
  CHECK(r->body == fmt::format("got {} sum {}", kSize, sum));
  std::uint64_t peak = proc_status_kb("VmHWM:");
  CHECK_MESSAGE(peak < before + 40 * 1024, "RSS grew from ", before, " kB to a peak of ", peak, " kB");
  REQUIRE(p.wait_outcomes(1));
  CHECK(p.outcomes[0].request_bytes == kSize);
}

TEST_CASE("proxy: a 50 MB download streams back in bounded memory; chunked and close-delimited ones are re-chunked") {
  Proxy p;
  constexpr std::uint64_t kSize = 50ull << 20;
  std::ofstream("/proc/self/clear_refs") << "5";
  std::uint64_t before = proc_status_kb("VmRSS:");
  Wire c(dial(p.server->port()));
  REQUIRE(c.send(get(fmt::format("/a/app/download?n={}", kSize))));
  auto head = read_head(c);
  REQUIRE(head);
  CHECK(head->get("content-length") == std::to_string(kSize));
  std::uint64_t sum = 0, offset = 0;
  bool same = true;
  REQUIRE(c.exact(kSize, [&](std::string_view piece) {
    for (char ch : piece) same = same && ch == pattern_at(offset++);
    sum = mix(sum, piece);
  }));
  CHECK(same);
  std::uint64_t peak = proc_status_kb("VmHWM:");
  CHECK_MESSAGE(peak < before + 40 * 1024, "RSS grew from ", before, " kB to a peak of ", peak, " kB");
  REQUIRE(p.wait_outcomes(1));
  CHECK(p.outcomes[0].response_bytes == kSize);

  auto chunked = roundtrip(c, get("/a/app/download-chunked?n=3000000"));
  REQUIRE(chunked);
  CHECK(chunked->get("transfer-encoding") == "chunked");
  CHECK(chunked->body_bytes == 3000000);
  auto until_close = roundtrip(c, get("/a/app/until-close"));
  REQUIRE(until_close);
  CHECK(until_close->get("transfer-encoding") == "chunked");  // the client's connection outlives the app's
  CHECK(until_close->body == "the body ends when the app closes");
  auto again = roundtrip(c, get("/a/app/hello"));
  REQUIRE(again);
  CHECK(again->body == "hello /hello");
}

TEST_CASE("proxy: HEAD has no body and the connection goes on") {
  Proxy p;
  Wire c(dial(p.server->port()));
  auto h = roundtrip(c, "HEAD /a/app/download?n=1000 HTTP/1.1\r\nHost: x\r\n\r\n", true);
  REQUIRE(h);
  CHECK(h->status() == 200);
  CHECK(h->get("content-length") == "1000");
  auto next = roundtrip(c, get("/a/app/hello"));
  REQUIRE(next);
  CHECK(next->body == "hello /hello");
}

TEST_CASE("proxy: an HTTP/1.0 client gets a chunked upstream body delimited by the close") {
  Proxy p;
  Wire c(dial(p.server->port()));
  auto r = roundtrip(c, "GET /a/app/download-chunked?n=5000 HTTP/1.0\r\nHost: x\r\n\r\n");
  REQUIRE(r);
  CHECK(r->status() == 200);
  CHECK_FALSE(r->has("transfer-encoding"));
  CHECK(r->body_bytes == 5000);  // read until the proxy closed
  auto seen = p.app.seen();
  REQUIRE(seen.size() == 1);
  CHECK(seen[0].start.ends_with("HTTP/1.1"));  // upstream always speaks 1.1
}
