// The proxy's header rules without sockets: what Connection lists, the heads each way, chunk framing.
#include <doctest/doctest.h>

#include "http/proxy_headers.h"

using namespace kiln::server::http;

TEST_CASE("proxy headers: Connection's list, case and spaces aside, is hop-by-hop") {
  HeaderFields f{{"Connection", "Keep-Alive , X-Foo"}, {"connection", "x-bar"}};
  auto listed = connection_listed(f);
  CHECK(listed == std::vector<std::string>{"keep-alive", "x-foo", "x-bar"});
  CHECK(proxy_hop_by_hop("X-FOO", listed));
  CHECK(proxy_hop_by_hop("Proxy-Connection", {}));
  CHECK_FALSE(proxy_hop_by_hop("X-Kept", listed));
}

TEST_CASE("proxy headers: request head with drops, sets replacing the client's, framing, upgrade") {
  ProxyUpstream up;
  up.target = "/x?y=1";
  up.drop_prefixes = {"x-kiln-"};
  up.set_headers = {{"X-Forwarded-For", "10.0.0.1"}, {"Bad", "a\r\nInjected: 1"}};
  HeaderFields f{{"x-forwarded-for", "6.6.6.6"}, {"X-Kiln-Token", "t"}, {"Upgrade", "websocket"},
                 {"Content-Length", "3"}, {"Accept", "*/*"}};
  std::string plain = proxy_request_head("POST", up, f, false, BodyFraming::chunked, 0);
  CHECK(plain == "POST /x?y=1 HTTP/1.1\r\nAccept: */*\r\nX-Forwarded-For: 10.0.0.1\r\nHost: localhost\r\n"
                 "Transfer-Encoding: chunked\r\n\r\n");
  std::string upgrade = proxy_request_head("GET", up, f, true, BodyFraming::none, 0);
  CHECK(upgrade.find("Upgrade: websocket\r\nConnection: Upgrade\r\n") != std::string::npos);
}

TEST_CASE("proxy headers: response head keeps a bodyless Content-Length and a 101's Upgrade") {
  HeaderFields f{{"Content-Length", "10"}, {"Upgrade", "websocket"}, {"Connection", "upgrade"}, {"X-A", "1"}};
  CHECK(proxy_response_head(200, "OK", f, BodyFraming::none, 0, true) ==
        "HTTP/1.1 200 OK\r\nContent-Length: 10\r\nX-A: 1\r\nConnection: close\r\n\r\n");
  CHECK(proxy_response_head(200, "", f, BodyFraming::chunked, 0, false) ==
        "HTTP/1.1 200 OK\r\nX-A: 1\r\nTransfer-Encoding: chunked\r\n\r\n");
  CHECK(proxy_response_head(101, "Switching Protocols", f, BodyFraming::none, 0, false) ==
        "HTTP/1.1 101 Switching Protocols\r\nContent-Length: 10\r\nUpgrade: websocket\r\nX-A: 1\r\n"
        "Connection: Upgrade\r\n\r\n");
}

TEST_CASE("proxy headers: chunk framing") {
  std::string before, after;
  chunk_framing(255, false, before, after);
  CHECK(before == "ff\r\n");
  CHECK(after == "\r\n");
  chunk_framing(0, true, before, after);
  CHECK(before.empty());
  CHECK(after == "0\r\n\r\n");
}

TEST_CASE("proxy headers: Set-Cookie of a dropped name (any case, spaces, Path), or of no name, is dropped") {
  const std::vector<std::string> kiln{"kiln_session"};
  CHECK(set_cookie_dropped("kiln_session=x; Path=/a/other/", kiln));
  CHECK(set_cookie_dropped(" Kiln_Session =; Max-Age=0", kiln));
  CHECK(set_cookie_dropped("=kiln_session=x", kiln));  // a browser would send "kiln_session=x"
  CHECK(set_cookie_dropped("kiln_session", kiln));     // no '=': all value, no name
  CHECK(set_cookie_dropped("  =v", kiln));
  CHECK_FALSE(set_cookie_dropped("kiln_session_x=1", kiln));
  CHECK_FALSE(set_cookie_dropped("theme=kiln_session=1; Path=/", kiln));
  HeaderFields f{{"Set-Cookie", "kiln_session=x; Path=/"}, {"set-cookie", "theme=dark"}};
  CHECK(proxy_response_head(200, "OK", f, BodyFraming::none, 0, false, kiln) ==
        "HTTP/1.1 200 OK\r\nset-cookie: theme=dark\r\n\r\n");
  CHECK(proxy_response_head(200, "OK", f, BodyFraming::none, 0, false).find("kiln_session=x") != std::string::npos);
}
