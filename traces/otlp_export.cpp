// OTLP/JSON export of trace records. The mapping follows the protobuf JSON rules OTLP/HTTP uses:
// 64-bit integers are decimal strings, enums are their numbers, ids are lowercase hex.
#include "traces/otlp_export.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <optional>

#include "traces/report_common.h"
#include "traces/trace_util.h"

namespace kiln::traces {
namespace {

using nlohmann::json;

// Collectors cap attribute values (Jaeger, Tempo: tens of KiB); a huge command line would get
// the whole span refused rather than cut.
constexpr std::size_t kMaxValueBytes = 16 * 1024;
constexpr std::size_t kMaxSpanNameBytes = 120;
constexpr int kSpanKindInternal = 2;
constexpr int kStatusOk = 1;
constexpr int kStatusError = 2;

uint64_t fnv1a64(std::string_view s, uint64_t h = 14695981039346656037ull) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

bool is_lower_hex(std::string_view s) {
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

std::string text(std::string_view s) { return detail::clip_text(s, kMaxValueBytes); }

class Attributes {
 public:
  void str(const char* key, std::string_view v) { add(key, {{"stringValue", text(v)}}); }
  void str_if(const char* key, std::string_view v) {
    if (!v.empty()) str(key, v);
  }
  void integer(const char* key, int64_t v) { add(key, {{"intValue", std::to_string(v)}}); }
  void boolean(const char* key, bool v) { add(key, {{"boolValue", v}}); }
  // A member of a stored JSON object: only numbers, booleans and strings are exported.
  void member(const char* key, const json& obj, const char* name) {
    if (!obj.is_object()) return;
    auto it = obj.find(name);
    if (it == obj.end()) return;
    if (it->is_number_unsigned()) add(key, {{"intValue", std::to_string(it->get<uint64_t>())}});
    else if (it->is_number_integer()) integer(key, it->get<int64_t>());
    else if (it->is_number_float()) add(key, {{"doubleValue", it->get<double>()}});
    else if (it->is_boolean()) boolean(key, it->get<bool>());
    else if (it->is_string()) str_if(key, it->get_ref<const std::string&>());
  }
  json take() { return std::move(list_); }

 private:
  void add(const char* key, json value) { list_.push_back({{"key", key}, {"value", std::move(value)}}); }
  json list_ = json::array();
};

std::optional<int64_t> unix_ms(const std::optional<std::string>& iso) {
  if (!iso || iso->empty()) return std::nullopt;
  return detail::parse_iso8601_ms(*iso);
}

std::string nanos(int64_t ms) { return std::to_string(ms * 1'000'000); }

std::string span_name(const TraceRecord& r) {
  const std::string& what = r.name.empty() ? r.command : r.name;
  std::string kind = r.kind.empty() ? "run" : r.kind;
  if (what.empty()) return kind;
  // A verify's command already reads "verify: build, test".
  if (what.starts_with(kind)) return detail::clip_text(what, kMaxSpanNameBytes);
  return detail::clip_text(fmt::format("{} {}", kind, what), kMaxSpanNameBytes);
}

const json* tests_of(const TraceRecord& r) { return r.tests.is_object() ? &r.tests : nullptr; }

int64_t failed_tests(const TraceRecord& r) {
  const json* t = tests_of(r);
  if (!t) return 0;
  auto it = t->find("failed");
  return it != t->end() && it->is_number_integer() ? it->get<int64_t>() : 0;
}

// Says why in a line, as a span list shows it: the recorded error, else how the run ended.
std::string status_message(const TraceRecord& r) {
  if (!r.error.empty()) return detail::clip_text(r.error, 1024);
  std::vector<std::string> parts;
  if (r.status == "interrupted") parts.push_back("interrupted (the process recording the run went away)");
  else if (!r.stop_reason.empty() && r.stop_reason != "exit") parts.push_back(fmt::format("stopped: {}", r.stop_reason));
  if (r.exit_code) parts.push_back(fmt::format("exit code {}", *r.exit_code));
  if (r.signal) parts.push_back(fmt::format("signal {}", *r.signal));
  if (int64_t n = failed_tests(r); n > 0) parts.push_back(fmt::format("{} test{} failed", n, n == 1 ? "" : "s"));
  // A verify ends with exit code null: which checks did not pass is what says why.
  if (r.result.is_object() && r.result.contains("checks") && r.result["checks"].is_array()) {
    std::string bad;
    for (const auto& c : r.result["checks"]) {
      if (!c.is_object() || !c.contains("status") || c["status"] == "pass") continue;
      auto str = [&](const char* key) { return c.contains(key) && c[key].is_string() ? c[key].get<std::string>() : "?"; };
      bad += fmt::format("{}{} ({})", bad.empty() ? "" : ", ", str("name"), str("status"));
    }
    if (!bad.empty()) parts.push_back("checks not passed: " + bad);
  }
  if (parts.empty()) return r.status;
  std::string out = parts[0];
  for (size_t i = 1; i < parts.size(); ++i) out += "; " + parts[i];
  return text(out);
}

json span_attributes(const TraceRecord& r, bool running) {
  Attributes a;
  a.str("kiln.trace_id", r.id);
  a.str("kiln.kind", r.kind);
  a.str_if("kiln.workspace", r.workspace_id);
  a.str_if("kiln.name", r.name);
  if (r.parent_id) a.str("kiln.parent_id", *r.parent_id);
  a.str_if("kiln.command", r.command);
  a.str_if("process.command_line", r.command);
  a.str_if("kiln.cwd", r.cwd);
  a.str("kiln.status", r.status);
  a.str_if("kiln.stop_reason", r.stop_reason);
  if (r.exit_code) a.integer("kiln.exit_code", *r.exit_code);
  if (r.signal) a.integer("kiln.signal", *r.signal);
  if (r.duration_ms) a.integer("kiln.duration_ms", *r.duration_ms);
  a.str_if("kiln.error", r.error);
  a.member("kiln.client.name", r.client, "name");
  a.member("kiln.client.version", r.client, "version");
  a.member("kiln.policy.network", r.policy, "network");
  a.member("kiln.policy.isolation", r.policy, "isolation");
  a.member("kiln.peak_memory_bytes", r.resources, "peak_memory_bytes");
  a.member("kiln.peak_memory_source", r.resources, "peak_memory_source");
  a.member("kiln.cpu.user_ms", r.resources, "user_ms");
  a.member("kiln.cpu.sys_ms", r.resources, "sys_ms");
  a.member("kiln.output.stdout_bytes", r.output, "stdout_bytes");
  a.member("kiln.output.stderr_bytes", r.output, "stderr_bytes");
  a.member("kiln.output.dropped_bytes", r.output, "dropped_bytes");
  a.member("kiln.output.truncated", r.output, "truncated");
  a.member("kiln.tests.passed", r.tests, "passed");
  a.member("kiln.tests.failed", r.tests, "failed");
  a.member("kiln.tests.skipped", r.tests, "skipped");
  a.member("kiln.tests.failures_truncated", r.tests, "failures_truncated");
  if (running) a.boolean("kiln.running", true);
  return a.take();
}

// One event per failed test, at the end of the run (the report only exists once it has ended).
json failure_events(const TraceRecord& r, const std::string& at) {
  json events = json::array();
  const json* t = tests_of(r);
  if (!t || !t->contains("failures") || !(*t)["failures"].is_array()) return events;
  for (const auto& f : (*t)["failures"]) {
    if (!f.is_object()) continue;
    Attributes a;
    a.member("test.case.name", f, "name");
    a.member("test.failure.message", f, "message");
    a.member("code.file.path", f, "file");
    a.member("code.line.number", f, "line");
    events.push_back({{"timeUnixNano", at}, {"name", "test.failure"}, {"attributes", a.take()}});
  }
  return events;
}

json span_of(const TraceRecord& r, const std::string& trace_id, const std::optional<std::string>& parent_span) {
  const bool running = r.status == "running" || !r.ended_at;
  auto start_ms = unix_ms(r.started_at);
  auto end_ms = running ? start_ms : unix_ms(r.ended_at);
  // A start that does not parse (never written by the store) borrows the end, and the other way round.
  if (!start_ms) start_ms = end_ms;
  if (!end_ms) end_ms = start_ms;
  const std::string start = nanos(start_ms.value_or(0));
  const std::string end = nanos(std::max(end_ms.value_or(0), start_ms.value_or(0)));

  json span{{"traceId", trace_id},
            {"spanId", otlp_span_id(r.id)},
            {"name", span_name(r)},
            {"kind", kSpanKindInternal},
            {"startTimeUnixNano", start},
            {"endTimeUnixNano", end},
            {"attributes", span_attributes(r, running)}};
  if (parent_span) span["parentSpanId"] = *parent_span;
  if (json events = failure_events(r, end); !events.empty()) span["events"] = std::move(events);
  if (r.status == "pass") {
    span["status"] = {{"code", kStatusOk}};
  } else if (r.status == "fail" || r.status == "error" || r.status == "interrupted") {
    span["status"] = {{"code", kStatusError}, {"message", status_message(r)}};
  } else {
    span["status"] = json::object();  // unset: still running, or a status this exporter predates
  }
  return span;
}

std::string hex64(uint64_t v) { return fmt::format("{:016x}", v); }

}  // namespace

std::string otlp_trace_id(std::string_view root_trace_id) {
  std::string hi = hex64(fnv1a64(root_trace_id, fnv1a64("kiln.trace\x1f")));
  std::string lo = hex64(fnv1a64(root_trace_id, fnv1a64("kiln.trace\x1e")));
  std::string id = hi + lo;
  // All zeros is OTLP's "invalid id"; 2^-128 odds, but a collector would drop the whole trace.
  if (id == std::string(32, '0')) id[31] = '1';
  return id;
}

std::string otlp_span_id(std::string_view trace_id) {
  if (trace_id.size() == 19 && trace_id.starts_with("tr_")) {
    std::string_view hex = trace_id.substr(3);
    if (is_lower_hex(hex) && hex != std::string_view("0000000000000000")) return std::string(hex);
  }
  std::string id = hex64(fnv1a64(trace_id, fnv1a64("kiln.trace\x1f")));
  if (id == std::string(16, '0')) id[15] = '1';
  return id;
}

json to_otlp(const TraceRecord& root, const std::vector<TraceRecord>& children, std::string_view service_version) {
  const std::string trace_id = otlp_trace_id(root.id);
  const std::string root_span = otlp_span_id(root.id);
  json spans = json::array();
  spans.push_back(span_of(root, trace_id, std::nullopt));
  for (const auto& c : children) {
    spans.push_back(span_of(c, trace_id, c.parent_id ? otlp_span_id(*c.parent_id) : root_span));
  }

  Attributes resource;
  resource.str("service.name", "kiln");
  resource.str_if("service.version", service_version);
  json scope{{"name", "kiln"}};
  if (!service_version.empty()) scope["version"] = std::string(service_version);
  return json{{"resourceSpans",
               json::array({{{"resource", {{"attributes", resource.take()}}},
                             {"scopeSpans", json::array({{{"scope", scope}, {"spans", std::move(spans)}}})}}})}};
}

}  // namespace kiln::traces
