// Test results read from a runner's report file (JUnit XML, TAP), so that `verify` can say which
// tests failed and where instead of only "exit code 1".
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace kiln::traces {

// A verify result must stay small enough for an agent to read: a run with thousands of failures
// usually has one cause, and the first few hundred show it.
inline constexpr std::size_t kMaxReportFailures = 200;
inline constexpr std::size_t kMaxFailureMessageBytes = 4096;

struct TestFailure {
  std::string name;     // readable path, e.g. "suite > test"
  std::string message;  // at most ~4 KiB, valid UTF-8
  std::string file;     // "" when unknown
  std::optional<int> line;
};

// Counts cover every test in the report; `failures` holds at most kMaxReportFailures of them.
// TODO tests count as skipped (node's own summary keeps them out of pass and fail as well).
struct TestReport {
  std::string format;  // "junit" or "tap"
  std::uint64_t passed = 0, failed = 0, skipped = 0;
  std::vector<TestFailure> failures;
  bool failures_truncated = false;
};

Result<TestReport> parse_junit(std::string_view xml);
Result<TestReport> parse_tap(std::string_view text);
// format is "junit" or "tap" (as in kiln.json's report.format); anything else is invalid_argument.
Result<TestReport> parse_report(std::string_view format, std::string_view data);

// {"passed","failed","skipped","failures":[{"name","message","file","line"}]} plus
// "failures_truncated": true when failures were dropped; line is null when unknown.
nlohmann::json to_json(const TestReport& report);

}  // namespace kiln::traces
