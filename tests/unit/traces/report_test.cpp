// The JUnit and TAP parsers against reports real runners wrote (node --test, ctest, perl's
// Test::More; see tests/fixtures/reports/generate.sh) and against hand-written broken ones.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <fstream>
#include <sstream>
#include <string>

#include "traces/test_report.h"

using kiln::Errc;
using kiln::traces::parse_junit;
using kiln::traces::parse_report;
using kiln::traces::parse_tap;
using kiln::traces::TestFailure;
using kiln::traces::TestReport;

namespace {

constexpr std::string_view kNodeDir = "/tmp/kiln-report-fixtures/node/";

std::string fixture(const std::string& name) {
  std::ifstream in(std::string(KILN_TEST_FIXTURES) + "/reports/" + name, std::ios::binary);
  REQUIRE_MESSAGE(in.good(), "missing fixture " << name);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

TestReport parsed(std::string_view format, const std::string& name) {
  auto r = parse_report(format, fixture(name));
  REQUIRE_MESSAGE(r.has_value(), name << ": " << r.error().message);
  return *r;
}

// Runners may report tests in completion order, so look failures up by name.
const TestFailure& failure(const TestReport& report, std::string_view name) {
  for (const auto& f : report.failures) {
    if (f.name == name) return f;
  }
  std::string names;
  for (const auto& f : report.failures) names += "\n  " + f.name;
  FAIL("no failure named " << name << "; have:" << names);
  static const TestFailure none;
  return none;
}

void check_counts(const TestReport& r, std::uint64_t passed, std::uint64_t failed, std::uint64_t skipped) {
  CHECK(r.passed == passed);
  CHECK(r.failed == failed);
  CHECK(r.skipped == skipped);
  CHECK(r.failures.size() == failed);
  CHECK_FALSE(r.failures_truncated);
}

void check_where(const TestFailure& f, std::string_view file, std::optional<int> line) {
  CHECK(f.file == file);
  CHECK(f.line == line);
}

bool valid_utf8(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    const std::size_t len = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
    if (len == 0 || i + len > s.size()) return false;
    for (std::size_t k = 1; k < len; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    }
    i += len;
  }
  return true;
}

}  // namespace

// node --test: 7 tests. node's summary says pass 2, fail 2, skipped 1, todo 2; todos count as
// skipped here, so both of node's reporters give 2 / 2 / 3.
TEST_CASE("node's junit reporter: counts, todo as skipped, describe blocks in the name") {
  auto r = parsed("junit", "node-junit.xml");
  CHECK(r.format == "junit");
  check_counts(r, 2, 2, 3);
  const auto& wrong = failure(r, "adds wrongly on purpose");
  // node drops the message attribute's line breaks; the body has them and is used instead.
  CHECK(wrong.message == "Expected values to be strictly equal:\n\n4 !== 5");
  check_where(wrong, fmt::format("{}math.test.mjs", kNodeDir), 14);  // the assertion, not the test()
  const auto& helper = failure(r, "arithmetic > throws from a helper");
  CHECK(helper.message == "expected a positive number, got -1");
  check_where(helper, fmt::format("{}math.test.mjs", kNodeDir), 7);  // the throw inside the helper
}

TEST_CASE("node's tap reporter gives the same counts and failures as its junit reporter") {
  auto r = parsed("tap", "node-tap.tap");
  CHECK(r.format == "tap");
  check_counts(r, 2, 2, 3);
  const auto& wrong = failure(r, "adds wrongly on purpose");
  CHECK(wrong.message == "Expected values to be strictly equal:\n\n4 !== 5");
  check_where(wrong, fmt::format("{}math.test.mjs", kNodeDir), 14);
  const auto& helper = failure(r, "arithmetic > throws from a helper");
  CHECK(helper.message == "expected a positive number, got -1");
  check_where(helper, fmt::format("{}math.test.mjs", kNodeDir), 7);
}

// node's own summary: tests 8, pass 3, fail 1, cancelled 3, skipped 1. Cancelled tests fail here;
// a test() with t.test() subtests is a parent line, not a test of its own.
TEST_CASE("node junit: cancelled tests fail, a file that cannot load fails, t.test parents are suites") {
  auto r = parsed("junit", "node-hooks-junit.xml");
  check_counts(r, 2, 4, 1);
  CHECK(failure(r, "bad before > never runs a").message ==
        "test did not finish before its parent and was cancelled");
  failure(r, "bad before > never runs b");
  CHECK(failure(r, "too slow").message == "test timed out after 20ms");
  const auto& load = failure(r, fmt::format("{}broken_load.test.mjs", kNodeDir));
  CHECK(load.message == "test failed");
  check_where(load, "", std::nullopt);  // node's junit keeps no stack for it
}

TEST_CASE("node tap: a failing after() hook under passing tests is reported, not lost") {
  auto r = parsed("tap", "node-hooks.tap");
  check_counts(r, 2, 5, 1);
  const auto& hook = failure(r, "bad after");
  CHECK(hook.message == "teardown broke");
  check_where(hook, fmt::format("{}hooks.test.mjs", kNodeDir), 13);
  const auto& cancelled = failure(r, "bad before > never runs a");
  CHECK(cancelled.message == "test did not finish before its parent and was cancelled");
  check_where(cancelled, fmt::format("{}hooks.test.mjs", kNodeDir), 8);  // only a location: key
  const auto& load = failure(r, fmt::format("{}broken_load.test.mjs", kNodeDir));
  CHECK(load.message == "test failed");
  check_where(load, fmt::format("{}broken_load.test.mjs", kNodeDir), 1);
  CHECK(failure(r, "too slow").message == "test timed out after 20ms");
}

TEST_CASE("ctest --output-junit: message and location come from the test's output") {
  auto r = parsed("junit", "ctest-junit.xml");
  check_counts(r, 1, 1, 1);
  const auto& f = failure(r, "math_divides");  // classname repeats the name: no prefix
  CHECK(f.message == "/tmp/kiln-report-fixtures/ctest/check_math.cpp:15: FAILED: expected 7 / 2 == 4, got 3");
  check_where(f, "/tmp/kiln-report-fixtures/ctest/check_math.cpp", 15);
}

// perl's own verdict counts top-level lines (2 of 5 failed); leaves are counted here.
TEST_CASE("perl Test::More TAP with its diagnostics (stdout and stderr)") {
  auto r = parsed("tap", "perl-tap.tap");
  check_counts(r, 3, 2, 2);
  const auto& divides = failure(r, "divides");
  CHECK(divides.message == "Failed test 'divides'\nat t/math.t line 8.\ngot: '3'\nexpected: '4'");
  check_where(divides, "t/math.t", 8);
  const auto& nested = failure(r, "strings > counts letters");
  CHECK(nested.message == "Failed test 'counts letters'\nat t/math.t line 23.\ngot: '4'\nexpected: '5'");
  check_where(nested, "t/math.t", 23);
}

TEST_CASE("perl Test::More TAP from stdout alone: same counts, no diagnostics") {
  auto r = parsed("tap", "perl-tap-stdout.tap");
  check_counts(r, 3, 2, 2);
  CHECK(failure(r, "divides").message == "");
  check_where(failure(r, "divides"), "", std::nullopt);
  failure(r, "strings > counts letters");
}

TEST_CASE("junit: pytest, gtest, nested suites and Windows paths") {
  auto r = parsed("junit", "junit-pytest-style.xml");
  check_counts(r, 2, 5, 1);
  const auto& divides = failure(r, "tests.test_math > test_divides");
  CHECK(divides.message == "assert 3 == 4");
  check_where(divides, "tests/test_math.py", 7);                 // the testcase's own attributes win
  const auto& reads = failure(r, "tests.test_io > test_reads");  // <error> counts as failed
  CHECK(reads.message == "failed on setup with \"FileNotFoundError: data.csv\"");
  check_where(reads, "/work/proj/tests/conftest.py", 12);  // innermost frame outside the stdlib
  const auto& gtest = failure(r, "MathTest > Divides");
  CHECK(gtest.message.starts_with("/src/math_test.cc:14\nExpected equality of these values:"));
  check_where(gtest, "/src/math_test.cc", 14);  // file attribute, line from the message
  const auto& deep = failure(r, "widget.test.js > outer > inner > deep");
  CHECK(deep.message.starts_with("TypeError: cannot read properties of undefined\n    at check"));
  check_where(deep, "/work/proj/test/widget.test.js", 9);  // skips node_modules and node:internal
  const auto& windows = failure(r, "WidgetTests > (unnamed test)");
  CHECK(windows.message == "starting\nC:\\src\\widget.cpp(42): error: value mismatch");
  check_where(windows, "C:\\src\\widget.cpp", 42);
}

TEST_CASE("junit: a bare <testsuite> root and an empty <testsuites> are fine") {
  auto one = parse_junit(
      R"(<testsuite name="x"><testcase name="a"/><testcase name="b"><skipped/></testcase></testsuite>)");
  REQUIRE(one);
  check_counts(*one, 1, 0, 1);
  auto none = parse_junit("<?xml version=\"1.0\"?>\n<testsuites/>\n");
  REQUIRE(none);
  check_counts(*none, 0, 0, 0);
}

TEST_CASE("junit: errors say what is wrong and where") {
  auto broken = parse_junit(fixture("junit-broken.xml"));
  REQUIRE_FALSE(broken);
  CHECK(broken.error().code == Errc::invalid_argument);
  CHECK(broken.error().message ==
        "JUnit report is not well-formed XML at byte 216 (line 6): start-end tags mismatch");

  auto mismatch = parse_junit("<testsuites>\n<testsuite></testcase>\n</testsuites>");
  REQUIRE_FALSE(mismatch);
  CHECK(mismatch.error().message ==
        "JUnit report is not well-formed XML at byte 26 (line 2): start-end tags mismatch");

  auto other = parse_junit(fixture("junit-not-junit.xml"));
  REQUIRE_FALSE(other);
  CHECK(other.error().code == Errc::invalid_argument);
  CHECK(other.error().message ==
        "not a JUnit report: expected a <testsuites> or <testsuite> root element, found <project>");

  auto empty = parse_junit(fixture("empty.txt"));
  REQUIRE_FALSE(empty);
  CHECK(empty.error().code == Errc::invalid_argument);
  CHECK(empty.error().message ==
        "JUnit report is empty: expected an XML document with a <testsuites> or <testsuite> root");

  auto text = parse_junit(fixture("not-tap.txt"));
  REQUIRE_FALSE(text);
  CHECK(text.error().code == Errc::invalid_argument);
  CHECK(text.error().message ==
        "JUnit report is not well-formed XML at byte 57 (line 3): no document element found (expected a "
        "<testsuites> or <testsuite> root)");
}

TEST_CASE("tap: TAP 14 subtests, escapes, tape and node-tap diagnostics") {
  auto r = parsed("tap", "tap14-subtests.tap");
  check_counts(r, 2, 2, 1);
  const auto& nested = failure(r, "parser > numbers > reads negative numbers");
  CHECK(nested.message == "expected: -1, actual: 1");
  check_where(nested, "/work/proj/test/parse.js", 14);
  const auto& writer = failure(r, "writer keeps # in names");
  CHECK(writer.message == "wanted: 4, found: 3");
  check_where(writer, "test/writer.js", 21);
}

TEST_CASE("tap: a stream cut off inside a subtest reports the missing plan") {
  auto r = parsed("tap", "tap-truncated.tap");
  CHECK(r.passed == 2);
  CHECK(r.failed == 2);
  CHECK(r.skipped == 0);
  REQUIRE(r.failures.size() == 2);
  CHECK(r.failures[0].name == "inner fails");
  CHECK(r.failures[0].message == "boom");
  check_where(r.failures[0], "/x/group.test.js", 8);
  CHECK(r.failures[1].name == "missing plan");
  CHECK(r.failures[1].message ==
        "the TAP stream has no top-level plan (1..N): the run probably stopped before it finished");
}

TEST_CASE("tap: fewer results than planned, and more") {
  auto r = parsed("tap", "tap-short-plan.tap");
  CHECK(r.passed == 1);
  CHECK(r.failed == 2);
  REQUIRE(r.failures.size() == 2);
  CHECK(r.failures[0].name == "b");
  CHECK(r.failures[0].message == "got 1, expected 2");
  CHECK(r.failures[1].name == "missing tests");
  CHECK(r.failures[1].message ==
        "the plan 1..4 announced 4 tests but only 2 reported a result: the run probably stopped early");

  auto extra = parse_tap("1..1\nok 1\nok 2\n");
  REQUIRE(extra);
  CHECK(extra->passed == 2);
  REQUIRE(extra->failures.size() == 1);
  CHECK(extra->failures[0].name == "unplanned tests");
}

TEST_CASE("tap: Bail out! is a failure and ends the stream") {
  auto r = parsed("tap", "tap-bail-out.tap");
  CHECK(r.passed == 1);
  CHECK(r.failed == 1);
  REQUIRE(r.failures.size() == 1);
  CHECK(r.failures[0].name == "Bail out!");
  CHECK(r.failures[0].message == "database is not reachable");

  auto bare = parse_tap("ok 1\nBail out!\n");
  REQUIRE(bare);
  CHECK(bare->failures.at(0).message == "the test run bailed out");
}

TEST_CASE("tap: skip-all plans, directives and unnamed tests") {
  auto all = parsed("tap", "tap-skip-all.tap");
  check_counts(all, 0, 0, 0);

  auto r = parse_tap(
      "1..6\nok 1 - a # skip slow\nnot ok 2 - b # SKIP\nnot ok 3 - c # TODO later\nok 4 # todo\nnot ok 5\n"
      "not ok - e # time=3ms\n");
  REQUIRE(r);
  CHECK(r->passed == 0);
  CHECK(r->skipped == 4);
  CHECK(r->failed == 2);
  REQUIRE(r->failures.size() == 2);
  CHECK(r->failures[0].name == "test 5");
  CHECK(r->failures[1].name == "e");

  auto crlf = parse_tap("TAP version 13\r\n1..1\r\nnot ok 1 - windows\r\n");
  REQUIRE(crlf);
  CHECK(crlf->failures.at(0).name == "windows");
}

TEST_CASE("tap: a YAML block whose end marker is missing does not swallow the stream") {
  auto r = parse_tap(
      "1..2\nnot ok 1 - a\n  ---\n  message: \"first\\nsecond\"\n  line: 3\n  file: a.js\nok 2 - b\n");
  REQUIRE(r);
  CHECK(r->passed == 1);
  REQUIRE(r->failures.size() == 1);
  CHECK(r->failures[0].message == "first\nsecond");
  check_where(r->failures[0], "a.js", 3);
}

// node's deep-equal diff elides lines with a "..." line of its own; inside the block scalar it is
// text, and only "..." at the block's own indentation ends the YAML block.
TEST_CASE("tap: a \"...\" line inside a block scalar is part of the message") {
  auto r = parse_tap(
      "TAP version 13\nnot ok 1 - deep\n  ---\n  location: '/w/a.test.mjs:3:1'\n  error: |-\n"
      "    Expected values to be strictly deep-equal:\n    + actual - expected ... Lines skipped\n    \n"
      "      {\n    +   x: 'a',\n    -   x: 'b',\n        y: [\n    ...\n          2\n        ]\n      }\n"
      "  code: 'ERR_ASSERTION'\n  ...\n1..1\n");
  REQUIRE(r);
  REQUIRE(r->failures.size() == 1);
  CHECK(r->failures[0].message ==
        "Expected values to be strictly deep-equal:\n+ actual - expected ... Lines skipped\n\n  {\n+   x: 'a',\n"
        "-   x: 'b',\n    y: [\n...\n      2\n    ]\n  }");
  check_where(r->failures[0], "/w/a.test.mjs", 3);
}

TEST_CASE("tap: errors for empty and non-TAP input") {
  auto empty = parse_tap(fixture("empty.txt"));
  REQUIRE_FALSE(empty);
  CHECK(empty.error().code == Errc::invalid_argument);
  CHECK(empty.error().message ==
        "TAP report is empty: expected a \"TAP version\" line, a plan such as \"1..N\", or \"ok\" / \"not "
        "ok\" lines");
  auto other = parse_tap(fixture("not-tap.txt"));
  REQUIRE_FALSE(other);
  CHECK(other.error().code == Errc::invalid_argument);
  CHECK(other.error().message ==
        "no TAP found in the report: expected a \"TAP version\" line, a plan such as \"1..N\", or \"ok\" / "
        "\"not ok\" lines");
  CHECK_FALSE(parse_tap("okay then\n1..x\n"));
}

TEST_CASE("parse_report picks the parser by format and refuses others") {
  CHECK(parse_report("junit", fixture("ctest-junit.xml"))->format == "junit");
  CHECK(parse_report("tap", fixture("node-tap.tap"))->format == "tap");
  auto bad = parse_report("xunit", "<testsuites/>");
  REQUIRE_FALSE(bad);
  CHECK(bad.error().code == Errc::invalid_argument);
  CHECK(bad.error().message == "unknown test report format \"xunit\": use \"junit\" or \"tap\"");
}

TEST_CASE("at most 200 failures are kept, but all are counted") {
  std::string xml = "<testsuites>";
  for (int i = 0; i < 250; ++i)
    xml += fmt::format(R"(<testcase name="t{}"><failure message="m{}"/></testcase>)", i, i);
  xml += "<testcase name=\"ok\"/></testsuites>";
  auto r = parse_junit(xml);
  REQUIRE(r);
  CHECK(r->failed == 250);
  CHECK(r->passed == 1);
  CHECK(r->failures.size() == 200);
  CHECK(r->failures_truncated);
  CHECK(r->failures.back().name == "t199");
  CHECK(to_json(*r).at("failures_truncated") == true);

  std::string tap = "1..250\n";
  for (int i = 0; i < 250; ++i) tap += fmt::format("not ok {} - t{}\n", i + 1, i);
  auto t = parse_tap(tap);
  REQUIRE(t);
  CHECK(t->failed == 250);
  CHECK(t->failures.size() == 200);
  CHECK(t->failures_truncated);
}

TEST_CASE("messages are cut to 4 KiB at a UTF-8 boundary and repaired") {
  std::string long_text;
  for (int i = 0; i < 3000; ++i) long_text += "\xC3\xA9";  // é, 6000 bytes
  auto r = parse_junit(
      fmt::format("<testsuite><testcase name=\"x\"><failure>{}</failure></testcase></testsuite>", long_text));
  REQUIRE(r);
  const auto& m = r->failures.at(0).message;
  CHECK(m.size() <= kiln::traces::kMaxFailureMessageBytes);
  CHECK(m.size() > 4000);
  CHECK(m.ends_with("\xE2\x80\xA6"));
  CHECK(valid_utf8(m));

  auto bad = parse_tap("1..1\nnot ok 1 - bad \xFF byte\n  ---\n  error: 'broken \xC3 utf8'\n  ...\n");
  REQUIRE(bad);
  CHECK(bad->failures.at(0).name == "bad \xEF\xBF\xBD byte");
  CHECK(bad->failures.at(0).message == "broken \xEF\xBF\xBD utf8");
  CHECK_NOTHROW((void)to_json(*bad).dump());

  // ctest-style output: the end of what the test printed is what explains the failure.
  std::string out(10000, 'x');
  out += "\nfinal.cpp:7: FAILED";
  auto tail = parse_junit(fmt::format(
      "<testsuite><testcase name=\"t\"><failure/><system-out>{}</system-out></testcase></testsuite>", out));
  REQUIRE(tail);
  CHECK(tail->failures.at(0).message.ends_with("\nfinal.cpp:7: FAILED"));
  CHECK(tail->failures.at(0).message.starts_with("\xE2\x80\xA6"));
  check_where(tail->failures.at(0), "final.cpp", 7);
}

TEST_CASE("to_json has the verify result's shape") {
  TestReport r;
  r.format = "junit";
  r.passed = 3;
  r.failed = 1;
  r.skipped = 2;
  r.failures.push_back(TestFailure{"a > b", "boom", "", std::nullopt});
  const auto j = to_json(r);
  CHECK(j == nlohmann::json::parse(R"({"passed":3,"failed":1,"skipped":2,
      "failures":[{"name":"a > b","message":"boom","file":"","line":null}]})"));
  r.failures[0].file = "x.cpp";
  r.failures[0].line = 9;
  CHECK(to_json(r)["failures"][0]["line"] == 9);
}

TEST_CASE("big and deeply nested reports") {
  std::string xml = "<testsuites><testsuite name=\"big\">";
  for (int i = 0; i < 20000; ++i) xml += "<testcase name=\"t\" classname=\"c\"/>";
  xml += "</testsuite></testsuites>";
  auto big = parse_junit(xml);
  REQUIRE(big);
  CHECK(big->passed == 20000);

  std::string deep;
  for (int i = 0; i < 20000; ++i) deep += "<testsuite name=\"s\">";
  deep += "<testcase name=\"leaf\"><failure message=\"m\"/></testcase>";
  for (int i = 0; i < 20000; ++i) deep += "</testsuite>";
  auto nested = parse_junit(deep);
  REQUIRE(nested);
  CHECK(nested->failed == 1);
  CHECK(nested->failures.at(0).name.ends_with("s > s > leaf"));

  std::string tap = "TAP version 14\n";
  for (int i = 0; i < 100000; ++i) tap += fmt::format("ok {} - t\n", i + 1);
  tap += "1..100000\n";
  auto many = parse_tap(tap);
  REQUIRE(many);
  CHECK(many->passed == 100000);
  CHECK(many->failures.empty());
}
