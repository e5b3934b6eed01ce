// Pieces both report parsers share, so that a JUnit and a TAP report of the same run name, clip
// and locate their failures the same way. Internal to traces/.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "traces/test_report.h"

namespace kiln::traces::detail {

struct SourceLocation {
  std::string file;
  std::optional<int> line;
};

// Finds the most useful "file:line" in failure text (a stack, an assertion message, a traceback):
// the first frame outside node internals and node_modules, or for Python tracebacks the innermost
// frame outside site-packages. Only the first 64 KiB are scanned.
std::optional<SourceLocation> find_source_location(std::string_view text);

// Test and file names in a report are cut to this many bytes (JUnit and TAP alike).
inline constexpr std::size_t kMaxNameBytes = 1024;

// Valid UTF-8 (invalid bytes become U+FFFD), cut at a character boundary to at most max_bytes,
// with "…" marking a cut. keep_tail keeps the end instead (process output ends with the error).
std::string clip_text(std::string_view text, std::size_t max_bytes, bool keep_tail = false);

std::string_view trim(std::string_view s);

// Counts the failure and keeps it unless kMaxReportFailures are already kept.
void add_failure(TestReport& report, TestFailure failure);

// Parses a decimal line number; nullopt for anything else or values that do not fit an int.
std::optional<int> parse_line_number(std::string_view digits);

}  // namespace kiln::traces::detail
