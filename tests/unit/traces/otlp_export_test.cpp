// OTLP/JSON export: the ExportTraceServiceRequest shape collectors accept, id formats, 64-bit
// times as decimal strings, parent links, statuses, test-failure events and running records.
#include <doctest/doctest.h>

#include <regex>
#include <string>

#include "traces/otlp_export.h"

using namespace kiln::traces;
using nlohmann::json;

namespace {

TraceRecord verify_root() {
  TraceRecord r;
  r.id = "tr_00000000000000aa";
  r.kind = "verify";
  r.workspace_id = "ws_1";
  r.status = "fail";
  r.started_at = "2026-01-02T03:04:05.678Z";
  r.ended_at = "2026-01-02T03:04:15.000Z";
  r.duration_ms = 9322;
  return r;
}

TraceRecord step(std::string id, std::string name, std::string status) {
  TraceRecord r;
  r.id = std::move(id);
  r.kind = "exec";
  r.workspace_id = "ws_1";
  r.parent_id = "tr_00000000000000aa";
  r.name = std::move(name);
  r.command = "make check";
  r.cwd = "/work/p";
  r.status = std::move(status);
  r.started_at = "2026-01-02T03:04:06.000Z";
  r.ended_at = "2026-01-02T03:04:07.500Z";
  r.duration_ms = 1500;
  r.exit_code = r.status == "pass" ? 0 : 2;
  r.stop_reason = "exit";
  r.resources = {{"peak_memory_bytes", 1048576}, {"peak_memory_source", "cgroup"}, {"user_ms", 120}, {"sys_ms", 30}};
  r.output = {{"stdout_bytes", 10}, {"stderr_bytes", 0}, {"dropped_bytes", 0}, {"truncated", false}};
  return r;
}

// The value of attribute `key` in an OTLP attribute list, or null.
json attr(const json& list, const std::string& key) {
  for (const auto& a : list) {
    if (a["key"] == key) return a["value"];
  }
  return nullptr;
}

}  // namespace

TEST_CASE("to_otlp: resourceSpans > scopeSpans > spans with service.name kiln") {
  json out = to_otlp(verify_root(), {step("tr_00000000000000b1", "build", "pass")}, "1.2.3");
  REQUIRE(out["resourceSpans"].is_array());
  REQUIRE(out["resourceSpans"].size() == 1);
  const json& rs = out["resourceSpans"][0];
  CHECK(attr(rs["resource"]["attributes"], "service.name") == json{{"stringValue", "kiln"}});
  CHECK(attr(rs["resource"]["attributes"], "service.version") == json{{"stringValue", "1.2.3"}});
  REQUIRE(rs["scopeSpans"].size() == 1);
  CHECK(rs["scopeSpans"][0]["scope"] == json{{"name", "kiln"}, {"version", "1.2.3"}});
  CHECK(rs["scopeSpans"][0]["spans"].size() == 2);
  // Without a version the members are left out rather than empty.
  json bare = to_otlp(verify_root(), {});
  CHECK(attr(bare["resourceSpans"][0]["resource"]["attributes"], "service.version").is_null());
  CHECK_FALSE(bare["resourceSpans"][0]["scopeSpans"][0]["scope"].contains("version"));
}

TEST_CASE("to_otlp: ids, kinds, times and parent links") {
  const std::regex trace_re("^[0-9a-f]{32}$"), span_re("^[0-9a-f]{16}$"), nanos_re("^[0-9]+$");
  json out = to_otlp(verify_root(), {step("tr_00000000000000b1", "build", "pass"),
                                     step("tr_00000000000000b2", "test", "fail")});
  const json& spans = out["resourceSpans"][0]["scopeSpans"][0]["spans"];
  const std::string trace_id = spans[0]["traceId"];
  CHECK(std::regex_match(trace_id, trace_re));
  CHECK(trace_id != std::string(32, '0'));
  CHECK(trace_id == otlp_trace_id("tr_00000000000000aa"));
  CHECK(otlp_trace_id("tr_00000000000000aa") != otlp_trace_id("tr_00000000000000ab"));
  for (const auto& s : spans) {
    CHECK(s["traceId"] == trace_id);
    CHECK(std::regex_match(s["spanId"].get<std::string>(), span_re));
    CHECK(s["kind"] == 2);
    REQUIRE(s["startTimeUnixNano"].is_string());
    REQUIRE(s["endTimeUnixNano"].is_string());
    CHECK(std::regex_match(s["startTimeUnixNano"].get<std::string>(), nanos_re));
    CHECK(std::stoull(s["endTimeUnixNano"].get<std::string>()) >= std::stoull(s["startTimeUnixNano"].get<std::string>()));
  }
  CHECK(spans[0]["spanId"] == "00000000000000aa");
  CHECK_FALSE(spans[0].contains("parentSpanId"));
  CHECK(spans[1]["parentSpanId"] == spans[0]["spanId"]);
  CHECK(spans[2]["parentSpanId"] == spans[0]["spanId"]);
  // 2026-01-02T03:04:05.678Z is 1767323045678 ms.
  CHECK(spans[0]["startTimeUnixNano"] == "1767323045678000000");
  CHECK(spans[1]["endTimeUnixNano"] == "1767323047500000000");
  CHECK(spans[0]["name"] == "verify");
  CHECK(spans[1]["name"] == "exec build");
  // Ids of another shape are hashed, still 16 hex digits, still stable.
  CHECK(std::regex_match(otlp_span_id("run_42"), span_re));
  CHECK(otlp_span_id("run_42") == otlp_span_id("run_42"));
  CHECK(otlp_span_id("tr_0000000000000000") != "0000000000000000");
}

TEST_CASE("to_otlp: attributes and statuses") {
  TraceRecord failed = step("tr_00000000000000b2", "test", "fail");
  failed.tests = {{"passed", 3},
                  {"failed", 2},
                  {"skipped", 1},
                  {"failures",
                   {{{"name", "suite > adds"}, {"message", "expected 2"}, {"file", "src/a.test.js"}, {"line", 12}},
                    {{"name", "suite > subs"}, {"message", "boom"}, {"file", ""}, {"line", nullptr}}}}};
  json out = to_otlp(verify_root(), {step("tr_00000000000000b1", "build", "pass"), failed});
  const json& spans = out["resourceSpans"][0]["scopeSpans"][0]["spans"];
  const json& ok = spans[1];
  CHECK(ok["status"] == json{{"code", 1}});
  CHECK(attr(ok["attributes"], "kiln.kind") == json{{"stringValue", "exec"}});
  CHECK(attr(ok["attributes"], "kiln.workspace") == json{{"stringValue", "ws_1"}});
  CHECK(attr(ok["attributes"], "kiln.command") == json{{"stringValue", "make check"}});
  CHECK(attr(ok["attributes"], "process.command_line") == json{{"stringValue", "make check"}});
  CHECK(attr(ok["attributes"], "kiln.cwd") == json{{"stringValue", "/work/p"}});
  CHECK(attr(ok["attributes"], "kiln.exit_code") == json{{"intValue", "0"}});
  CHECK(attr(ok["attributes"], "kiln.stop_reason") == json{{"stringValue", "exit"}});
  CHECK(attr(ok["attributes"], "kiln.status") == json{{"stringValue", "pass"}});
  CHECK(attr(ok["attributes"], "kiln.peak_memory_bytes") == json{{"intValue", "1048576"}});
  CHECK(attr(ok["attributes"], "kiln.cpu.user_ms") == json{{"intValue", "120"}});
  CHECK(attr(ok["attributes"], "kiln.output.truncated") == json{{"boolValue", false}});
  CHECK(attr(ok["attributes"], "kiln.running").is_null());
  CHECK_FALSE(ok.contains("events"));

  const json& bad = spans[2];
  CHECK(bad["status"]["code"] == 2);
  CHECK(bad["status"]["message"] == "exit code 2; 2 tests failed");
  CHECK(attr(bad["attributes"], "kiln.tests.passed") == json{{"intValue", "3"}});
  CHECK(attr(bad["attributes"], "kiln.tests.failed") == json{{"intValue", "2"}});
  CHECK(attr(bad["attributes"], "kiln.tests.skipped") == json{{"intValue", "1"}});
  REQUIRE(bad["events"].size() == 2);
  const json& ev = bad["events"][0];
  CHECK(ev["name"] == "test.failure");
  CHECK(ev["timeUnixNano"] == bad["endTimeUnixNano"]);
  CHECK(attr(ev["attributes"], "test.case.name") == json{{"stringValue", "suite > adds"}});
  CHECK(attr(ev["attributes"], "test.failure.message") == json{{"stringValue", "expected 2"}});
  CHECK(attr(ev["attributes"], "code.file.path") == json{{"stringValue", "src/a.test.js"}});
  CHECK(attr(ev["attributes"], "code.line.number") == json{{"intValue", "12"}});
  // Unknown file and line are left out, not sent empty.
  CHECK(attr(bad["events"][1]["attributes"], "code.file.path").is_null());
  CHECK(attr(bad["events"][1]["attributes"], "code.line.number").is_null());

  TraceRecord timed_out = step("tr_00000000000000b3", "", "fail");
  timed_out.stop_reason = "timeout";
  timed_out.exit_code = 124;
  timed_out.signal = 9;
  json t = to_otlp(timed_out, {})["resourceSpans"][0]["scopeSpans"][0]["spans"][0];
  CHECK(t["status"]["message"] == "stopped: timeout; exit code 124; signal 9");
  CHECK(t["name"] == "exec make check");
  CHECK_FALSE(t.contains("parentSpanId"));  // exported on its own, its parent is not there

  TraceRecord broken = verify_root();
  broken.status = "error";
  broken.error = "kiln.json: verify[0].run is missing";
  json b = to_otlp(broken, {})["resourceSpans"][0]["scopeSpans"][0]["spans"][0];
  CHECK(b["status"] == json{{"code", 2}, {"message", "kiln.json: verify[0].run is missing"}});
  CHECK(attr(b["attributes"], "kiln.error") == json{{"stringValue", "kiln.json: verify[0].run is missing"}});

  TraceRecord gone = verify_root();
  gone.status = "interrupted";
  gone.stop_reason = "interrupted";
  json g = to_otlp(gone, {})["resourceSpans"][0]["scopeSpans"][0]["spans"][0];
  CHECK(g["status"]["code"] == 2);
  CHECK(g["status"]["message"].get<std::string>().starts_with("interrupted"));
}

TEST_CASE("to_otlp: a running record ends at its start and says so") {
  TraceRecord r = step("tr_00000000000000c1", "", "running");
  r.ended_at.reset();
  r.duration_ms.reset();
  r.exit_code.reset();
  json s = to_otlp(r, {})["resourceSpans"][0]["scopeSpans"][0]["spans"][0];
  CHECK(s["endTimeUnixNano"] == s["startTimeUnixNano"]);
  CHECK(attr(s["attributes"], "kiln.running") == json{{"boolValue", true}});
  CHECK(s["status"] == json::object());
  CHECK(attr(s["attributes"], "kiln.exit_code").is_null());
}

TEST_CASE("to_otlp: bad UTF-8 in a command still dumps with the strict handler") {
  TraceRecord r = step("tr_00000000000000d1", "", "pass");
  r.command = std::string("echo \xff\xfe ok");
  json out = to_otlp(r, {});
  std::string text;
  CHECK_NOTHROW(text = out.dump());
  CHECK(text.find("echo \xEF\xBF\xBD") != std::string::npos);
}

TEST_CASE("to_otlp: a verify names its command once and the checks that did not pass") {
  TraceRecord v = verify_root();
  v.command = "verify: build, test";
  v.stop_reason = "exit";
  v.result = {{"checks", {{{"name", "build"}, {"status", "pass"}}, {{"name", "test"}, {"status", "fail"}}}}};
  json s = to_otlp(v, {})["resourceSpans"][0]["scopeSpans"][0]["spans"][0];
  CHECK(s["name"] == "verify: build, test");
  CHECK(s["status"]["message"] == "checks not passed: test (fail)");
}
