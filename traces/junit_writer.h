// A verify result as JUnit XML, the one report format every CI system shows (GitLab, Jenkins,
// GitHub annotations): `kiln verify` in a pipeline then shows each check as a test case.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace kiln::traces {

// `verify_result` is the verify tool's result object ({status, duration_ms, trace_id, checks: [{
// name, status, exit_code, stop_reason, duration_ms, error, tests, trace_id}]}). Produces one
// <testsuite name="kiln verify"> with a <testcase classname="kiln.verify"> per check: <failure>
// for fail (how the check ended, then each failed test), <error> for error and for statuses this
// writer does not know, <skipped> for skipped and cancelled. The verify's and each check's trace id
// are suite properties ("trace_id", "<check>.trace_id"). Missing or mistyped members are left out,
// never thrown on; text is made valid XML 1.0 (bad UTF-8 and control characters replaced, terminal
// colour codes removed).
std::string verify_to_junit(const nlohmann::json& verify_result);

}  // namespace kiln::traces
