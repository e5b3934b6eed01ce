// The allowlist's matching rules, the address classes and the strict parsers, on their own.
#include <doctest/doctest.h>

#include "sandbox/egress/client_hello.h"
#include "sandbox/egress/egress_policy.h"
#include "sandbox/egress/ip_address.h"
#include "sandbox/egress/proxy_request.h"

using namespace kiln::egress;

namespace {
Policy policy(const char* json) {
  auto p = parse_policy(nlohmann::json::parse(json), "network");
  REQUIRE(p.has_value());
  return *p;
}
}  // namespace

TEST_CASE("names, wildcards, ports: deny wins and IP literals need an address entry") {
  auto p = policy(R"({"allow": ["registry.npmjs.org", "*.example.com", "api.example.net:8443", "203.0.113.0/24"],
                      "deny": ["bad.example.com"]})");
  CHECK(decide(p, "registry.npmjs.org", 443).allowed);
  CHECK(decide(p, "registry.npmjs.org", 80).allowed);
  CHECK_FALSE(decide(p, "registry.npmjs.org", 22).allowed);
  CHECK(decide(p, "a.b.example.com", 443).allowed);
  CHECK_FALSE(decide(p, "example.com", 443).allowed);          // *. is deeper names only
  CHECK_FALSE(decide(p, "evilexample.com", 443).allowed);
  CHECK_FALSE(decide(p, "bad.example.com", 443).allowed);
  CHECK(decide(p, "bad.example.com", 443).reason == "deny bad.example.com");
  CHECK(decide(p, "api.example.net", 8443).allowed);
  CHECK_FALSE(decide(p, "api.example.net", 443).allowed);
  CHECK(decide(p, "203.0.113.9", 443).allowed);
  CHECK_FALSE(decide(p, "198.51.100.1", 443).allowed);
  auto any = policy(R"({"allow": ["*"]})");
  CHECK(decide(any, "anything.org", 443).allowed);
  CHECK_FALSE(decide(any, "127.0.0.1", 80).allowed);           // "*" never matches an address
}

TEST_CASE("the ceiling narrows a request and never widens it") {
  Scope s{policy(R"({"allow": ["*"], "allow_private": true})"), policy(R"({"allow": ["*.npmjs.org"]})")};
  CHECK(s.decide("registry.npmjs.org", 443).allowed);
  CHECK_FALSE(s.decide("github.com", 443).allowed);
  CHECK_FALSE(s.allow_private());
}

TEST_CASE("deny address entries cover what a name resolves to, the ceiling's too") {
  Scope s{policy(R"({"allow": ["*"], "deny": ["10.0.0.0/8", "192.168.1.5:22"], "allow_private": true})"),
          policy(R"({"allow": ["*"], "deny": ["fd00::/8"], "allow_private": true})")};
  CHECK(s.denied_address(*IpAddress::parse("10.1.2.3"), 443) == "deny 10.0.0.0/8");
  CHECK_FALSE(s.denied_address(*IpAddress::parse("11.1.2.3"), 443));
  CHECK(s.denied_address(*IpAddress::parse("192.168.1.5"), 22));
  CHECK_FALSE(s.denied_address(*IpAddress::parse("192.168.1.5"), 443));  // the entry names a port
  auto c = s.denied_address(*IpAddress::parse("fd00::1"), 443);
  REQUIRE(c);
  CHECK(c->starts_with("the server's ceiling"));
  // Name entries never match an address.
  Scope names{policy(R"({"allow": ["*"], "deny": ["*.example.com", "*"]})"), std::nullopt};
  CHECK_FALSE(names.denied_address(*IpAddress::parse("10.1.2.3"), 443));
}

TEST_CASE("bad entries are refused with the field named") {
  for (const char* bad : {R"({"allow": ["exa mple.com"]})", R"({"allow": ["a.com:99999"]})", R"({"allow": [3]})",
                          R"({"alow": []})", R"({"allow": ["*.*.com"]})", R"({"allow_private": "yes"})"}) {
    CAPTURE(bad);
    auto p = parse_policy(nlohmann::json::parse(bad), "network");
    REQUIRE_FALSE(p.has_value());
    CHECK(p.error().message.find("network") != std::string::npos);
  }
}

TEST_CASE("non-public addresses, wrapped ones included") {
  auto cls = [](const char* a) { return classify(*IpAddress::parse(a)); };
  for (const char* a : {"127.0.0.1", "10.1.2.3", "172.16.0.1", "192.168.1.1", "100.64.0.1", "169.254.1.1", "0.0.0.0",
                        "::1", "::", "fe80::1", "fc00::1", "::ffff:127.0.0.1", "::ffff:10.0.0.1", "64:ff9b::a00:1",
                        "2002:7f00:1::", "224.0.0.1"}) {
    CAPTURE(a);
    CHECK_FALSE(cls(a).non_public.empty());
  }
  CHECK(cls("169.254.169.254").metadata);
  CHECK(cls("fd00:ec2::254").metadata);
  for (const char* a : {"203.0.113.80", "93.184.216.34", "2606:4700::1"}) {
    CAPTURE(a);
    CHECK(cls(a).non_public.empty());
  }
  CHECK_FALSE(IpAddress::parse("127.1").has_value());  // no inet_aton shorthands
}

TEST_CASE("proxy heads: absolute form is rewritten, ambiguity refused") {
  auto h = parse_proxy_head("GET http://Up.Test:8080/a?b HTTP/1.1\r\nHost: evil.test\r\nProxy-Authorization: x\r\n"
                            "Accept: */*\r\n\r\n");
  REQUIRE(h.state == HeadParse::State::ok);
  CHECK(h.request.host == "up.test");
  CHECK(h.request.port == 8080);
  CHECK(h.request.upstream_head ==
        "GET /a?b HTTP/1.1\r\nHost: up.test:8080\r\nAccept: */*\r\nConnection: close\r\n\r\n");
  auto c = parse_proxy_head("CONNECT registry.npmjs.org:443 HTTP/1.1\r\nHost: x\r\n\r\n");
  REQUIRE(c.state == HeadParse::State::ok);
  CHECK(c.request.connect);
  CHECK(c.request.port == 443);
  CHECK(parse_proxy_head("GET http://a.com@evil.com/ HTTP/1.1\r\n\r\n").state == HeadParse::State::refused);
  CHECK(parse_proxy_head("GET / HTTP/1.1\r\nHost: a\r\n\r\n").state == HeadParse::State::refused);
  CHECK(parse_proxy_head("CONNECT a.com HTTP/1.1\r\n\r\n").state == HeadParse::State::refused);
  CHECK(parse_proxy_head("GET http://a.com/ HTTP/1.1\r\n folded\r\n\r\n").state == HeadParse::State::refused);
  CHECK(parse_proxy_head("GET http://a.com/ HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n").state ==
        HeadParse::State::refused);
  CHECK(parse_proxy_head("GET http://a.com/ HTTP/1.1\r\nAcc").state == HeadParse::State::need_more);
}

TEST_CASE("ClientHello server name") {
  // A minimal TLS 1.2 ClientHello with SNI "a.test".
  std::string body;
  body += std::string("\x03\x03", 2) + std::string(32, 'r') + std::string("\x00", 1);  // version, random, no session
  body += std::string("\x00\x02\x13\x01", 4) + std::string("\x01\x00", 2);              // one suite, null compression
  std::string sni = std::string("\x00\x00", 2) + std::string("\x00\x0b", 2) + std::string("\x00\x09", 2) +
                    std::string("\x00", 1) + std::string("\x00\x06", 2) + "a.test";
  body += std::string("\x00", 1) + char(sni.size()) + sni;
  std::string hs = std::string("\x01\x00", 2) + char(body.size() >> 8) + char(body.size() & 0xff) + body;
  std::string rec = std::string("\x16\x03\x01", 3) + char(hs.size() >> 8) + char(hs.size() & 0xff) + hs;
  auto h = parse_client_hello(rec);
  REQUIRE(h.state == ClientHello::State::ok);
  CHECK(h.server_name == "a.test");
  CHECK(parse_client_hello(rec.substr(0, 20)).state == ClientHello::State::need_more);
  CHECK(parse_client_hello("GET / HTTP/1.1\r\n").state == ClientHello::State::not_tls);
}
