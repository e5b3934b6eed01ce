// verify_to_junit: one testcase per check, failure/error/skipped as CI viewers expect, escaping,
// and a round trip through the project's own JUnit reader.
#include <doctest/doctest.h>

#include <string>

#include "traces/junit_writer.h"
#include "traces/test_report.h"

using namespace kiln::traces;
using nlohmann::json;

namespace {

json sample_result() {
  return {{"status", "fail"},
          {"duration_ms", 12345},
          {"trace_id", "tr_00000000000000aa"},
          {"checks",
           {{{"name", "build"}, {"status", "pass"}, {"exit_code", 0}, {"stop_reason", "exit"},
             {"duration_ms", 2500}, {"tests", nullptr}, {"trace_id", "tr_00000000000000b1"}},
            {{"name", "test"}, {"status", "fail"}, {"exit_code", 1}, {"stop_reason", "exit"},
             {"duration_ms", 4000},
             {"tests",
              {{"passed", 10},
               {"failed", 2},
               {"skipped", 1},
               {"failures",
                {{{"name", "math > adds <big> & \"small\""}, {"message", "expected 3\n\x1b[31mgot 4\x1b[0m"},
                  {"file", "src/math.test.js"}, {"line", 7}},
                 {{"name", "math > subs"}, {"message", "boom"}, {"file", ""}, {"line", nullptr}}}}}},
             {"trace_id", "tr_00000000000000b2"}},
            {{"name", "lint"}, {"status", "error"}, {"exit_code", nullptr}, {"stop_reason", "setup_failed"},
             {"duration_ms", 3}, {"error", "cannot start the sandbox: no user namespaces"}, {"tests", nullptr},
             {"trace_id", "tr_00000000000000b3"}},
            {{"name", "e2e"}, {"status", "cancelled"}, {"exit_code", nullptr}, {"duration_ms", 0},
             {"tests", nullptr}, {"trace_id", nullptr}},
            {{"name", "docs"}, {"status", "skipped"}, {"duration_ms", 0}},
            {{"name", "slow"}, {"status", "fail"}, {"exit_code", 124}, {"stop_reason", "timeout"},
             {"duration_ms", 600000}, {"tests", nullptr}, {"trace_id", "tr_00000000000000b4"}}}}};
}

}  // namespace

TEST_CASE("verify_to_junit: one suite, a testcase per check, and the reader agrees on the counts") {
  const std::string xml = verify_to_junit(sample_result());
  CHECK(xml.starts_with("<?xml version=\"1.0\" encoding=\"UTF-8\"?>"));
  CHECK(xml.find("<testsuite name=\"kiln verify\" tests=\"6\" failures=\"2\" errors=\"1\" skipped=\"2\" "
                 "time=\"12.345\"") != std::string::npos);
  CHECK(xml.find("<testcase classname=\"kiln.verify\" name=\"build\" time=\"2.500\"") != std::string::npos);
  CHECK(xml.find("<property name=\"trace_id\" value=\"tr_00000000000000aa\"") != std::string::npos);
  CHECK(xml.find("<property name=\"test.trace_id\" value=\"tr_00000000000000b2\"") != std::string::npos);

  auto report = parse_junit(xml);
  REQUIRE_MESSAGE(report.has_value(), (report ? "" : report.error().message));
  CHECK(report->passed == 1);
  CHECK(report->failed == 3);  // the reader counts an <error> as a failure
  CHECK(report->skipped == 2);
  REQUIRE(report->failures.size() == 3);
  CHECK(report->failures[0].name == "kiln.verify > test");
  CHECK(report->failures[0].message == "exit code 1; 2 tests failed");
  CHECK(report->failures[1].name == "kiln.verify > lint");
  CHECK(report->failures[1].message == "cannot start the sandbox: no user namespaces");
  CHECK(report->failures[2].message == "stopped: timeout (exit code 124)");
}

TEST_CASE("verify_to_junit: failure text lists the failed tests, escaped and without colour codes") {
  const std::string xml = verify_to_junit(sample_result());
  CHECK(xml.find("math &gt; adds &lt;big&gt; &amp; \"small\" (src/math.test.js:7)") != std::string::npos);
  CHECK(xml.find("got 4") != std::string::npos);
  CHECK(xml.find('\x1b') == std::string::npos);
  CHECK(xml.find("[31m") == std::string::npos);
  CHECK(xml.find("math &gt; subs\n") != std::string::npos);
  CHECK(xml.find("trace: tr_00000000000000b2") != std::string::npos);
  CHECK(xml.find("<skipped message=\"cancelled\"") != std::string::npos);
  CHECK(xml.find("<skipped message=\"skipped\"") != std::string::npos);
  CHECK(xml.find("<error message=\"cannot start the sandbox: no user namespaces\" type=\"error\"") !=
        std::string::npos);
}

TEST_CASE("verify_to_junit: a passing verify, an empty one and a malformed one stay well-formed") {
  json pass = {{"status", "pass"}, {"duration_ms", 10}, {"trace_id", "tr_1"},
               {"checks", {{{"name", "build"}, {"status", "pass"}, {"duration_ms", 10}}}}};
  auto r = parse_junit(verify_to_junit(pass));
  REQUIRE(r);
  CHECK(r->passed == 1);
  CHECK(r->failed == 0);

  auto empty = parse_junit(verify_to_junit(json::object()));
  REQUIRE(empty);
  CHECK(empty->passed + empty->failed + empty->skipped == 0);

  // Wrong types everywhere, a control character and bad UTF-8: still a document the reader takes.
  json odd = {{"status", 3},
              {"duration_ms", "slow"},
              {"checks",
               {{{"name", std::string("we\x01ird\xff")}, {"status", "running"}, {"exit_code", "one"},
                 {"tests", {{"failed", "many"}, {"failures", "none"}}}},
                "not a check",
                {{"status", "fail"}, {"tests", {{"failures", {{{"name", 5}}}}}}}}}};
  std::string xml;
  CHECK_NOTHROW(xml = verify_to_junit(odd));
  auto o = parse_junit(xml);
  REQUIRE_MESSAGE(o.has_value(), (o ? "" : o.error().message));
  CHECK(o->failed == 3);  // an unknown status is an error; so is a check that is not an object
  CHECK(xml.find("check status 'running'") != std::string::npos);
  CHECK(xml.find('\x01') == std::string::npos);
  CHECK(xml.find("(unnamed check)") != std::string::npos);
}
