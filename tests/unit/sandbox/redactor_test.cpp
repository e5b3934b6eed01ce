// Secret redaction, including values split across output chunks at every possible boundary.
#include <doctest/doctest.h>

#include <memory>
#include <string>

#include "sandbox/redactor.h"

using namespace kiln::sandbox;

TEST_CASE("redact replaces every value with its name, longest first") {
  Redactor r(std::map<std::string, std::string>{{"TOKEN", "s3cr3t-value"}, {"SHORT", "s3cr3t"}});
  CHECK(r.redact("a s3cr3t-value b s3cr3t c") == "a [secret:TOKEN] b [secret:SHORT] c");
  CHECK(r.redact("nothing here") == "nothing here");
  nlohmann::json j = {{"out", "x s3cr3t y"}, {"list", {"s3cr3t-value"}}, {"s3cr3t", 1}};
  r.redact_json(j);
  CHECK(j["out"] == "x [secret:SHORT] y");
  CHECK(j["list"][0] == "[secret:TOKEN]");
  CHECK(j.contains("[secret:SHORT]"));
}

TEST_CASE("empty values are ignored") {
  Redactor r(std::map<std::string, std::string>{{"EMPTY", ""}});
  CHECK(r.empty());
  CHECK(r.redact("abc") == "abc");
}

TEST_CASE("stream redaction catches a value split at every boundary") {
  auto r = std::make_shared<Redactor>(std::map<std::string, std::string>{{"API_KEY", "hunter2-xyz"}});
  const std::string text = "before hunter2-xyz middle hunter2-xyzhunter2-xyz after hunter2-x";
  const std::string want = r->redact(text);
  for (std::size_t a = 0; a <= text.size(); ++a) {
    for (std::size_t b = a; b <= text.size(); b += 3) {
      StreamRedactor s(r);
      std::string out = s.feed(text.substr(0, a));
      out += s.feed(text.substr(a, b - a));
      out += s.feed(text.substr(b));
      out += s.finish();
      REQUIRE(out == want);
      CHECK(out.find("hunter2-xyz") == std::string::npos);
    }
  }
}

TEST_CASE("stream redaction byte by byte, with overlapping values") {
  auto r = std::make_shared<Redactor>(std::map<std::string, std::string>{{"A", "abcdef"}, {"B", "abc"}, {"C", "cdxy"}});
  const std::string text = "xxabcdefyyabczzabcdxyqq";
  StreamRedactor s(r);
  std::string out;
  for (char c : text) out += s.feed(std::string(1, c));
  out += s.finish();
  CHECK(out == r->redact(text));
  CHECK(out.find("abcdef") == std::string::npos);
}

TEST_CASE("stream redaction holds back only what could still become a value") {
  auto r = std::make_shared<Redactor>(std::map<std::string, std::string>{{"K", "secret"}});
  StreamRedactor s(r);
  CHECK(s.feed("hello sec") == "hello ");
  CHECK(s.feed("ond") == "second");
  CHECK(s.feed("xx") == "xx");
  CHECK(s.finish().empty());
}
