// Inputs the fuzzers in fuzz/ found, kept as unit tests where the behaviour can be stated plainly
// (their raw inputs are also replayed from fuzz/regressions/ by scripts/fuzz.sh).
#include <doctest/doctest.h>

#include <string>

#include "serve/artifact_router.h"
#include "http/parse.h"

using namespace kiln::server::http;

// fuzz_http_router: "/a/NAME?<control bytes>" was redirected to "/a/NAME/?<control bytes>", so the
// Location header carried whatever bytes the query held (NUL, 0x01, ...).
TEST_CASE("a request-target with control characters in its query is refused") {
  std::string why;
  CHECK_FALSE(parse_target(std::string("/a/club?x=\x01y", 12), &why).has_value());
  CHECK(why == "control characters in the request-target");
  CHECK_FALSE(parse_target(std::string("/a/club?x\0y", 11), &why).has_value());
  CHECK_FALSE(parse_target("/a/club?x=\ty", &why).has_value());
  CHECK_FALSE(parse_target("/a/club?x=\x7f", &why).has_value());
  CHECK(parse_target("/a/club?x=%01", &why).has_value());  // escaped, it stays data

  Request req;
  req.method = "GET";
  req.target = std::string("/a/club?/?i\x01\0t", 14);
  RouterContext ctx;  // refused before any store is consulted
  Response r = route(req, ctx);
  CHECK(r.status == 400);
  CHECK(r.header("Location") == nullptr);
}
