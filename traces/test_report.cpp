// The format switch verify calls, the JSON shape of a parsed report, and the text helpers both
// parsers share (clipping, UTF-8 repair, the failure cap).
#include "traces/test_report.h"

#include <fmt/format.h>

#include "traces/report_common.h"

namespace kiln::traces {
namespace detail {

namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD
constexpr std::string_view kEllipsis = "\xE2\x80\xA6";     // "…"

// Length of the valid UTF-8 sequence at s[i], or 0 when the bytes there are not one.
std::size_t utf8_sequence_length(std::string_view s, std::size_t i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) return 1;
  std::size_t len = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte (rejects overlongs, surrogates)
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    len = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    len = 3;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    len = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (i + len > s.size()) return 0;
  const auto b1 = static_cast<unsigned char>(s[i + 1]);
  if (b1 < lo || b1 > hi) return 0;
  for (std::size_t k = 2; k < len; ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if (b < 0x80 || b > 0xBF) return 0;
  }
  return len;
}

// Appends s repaired to valid UTF-8, stopping before the character that would pass max_bytes.
// Returns false when it had to stop early.
bool append_valid_utf8(std::string& out, std::string_view s, std::size_t max_bytes) {
  std::size_t i = 0;
  while (i < s.size()) {
    std::size_t len = utf8_sequence_length(s, i);
    std::string_view piece = len ? s.substr(i, len) : kReplacement;
    if (out.size() + piece.size() > max_bytes) return false;
    out.append(piece);
    i += len ? len : 1;
  }
  return true;
}

}  // namespace

std::string_view trim(std::string_view s) {
  constexpr std::string_view kSpace = " \t\r\n\f\v";
  const auto b = s.find_first_not_of(kSpace);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(kSpace) - b + 1);
}

std::string clip_text(std::string_view text, std::size_t max_bytes, bool keep_tail) {
  std::string out;
  if (text.size() <= max_bytes && append_valid_utf8(out, text, max_bytes)) return out;
  out.clear();
  const std::size_t budget = max_bytes > kEllipsis.size() ? max_bytes - kEllipsis.size() : 0;
  if (!keep_tail) {
    append_valid_utf8(out, text.substr(0, budget + 4), budget);
    out.append(kEllipsis);
    return out;
  }
  // Repair first, then cut from the front: replacements may grow the text, and the end is what
  // the caller wants to keep.
  std::size_t start = text.size() > budget ? text.size() - budget : 0;
  for (int k = 0; k < 3 && start < text.size() && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80;
       ++k)
    ++start;
  std::string tail;
  append_valid_utf8(tail, text.substr(start), std::string::npos);
  std::size_t cut = tail.size() > budget ? tail.size() - budget : 0;
  while (cut < tail.size() && (static_cast<unsigned char>(tail[cut]) & 0xC0) == 0x80) ++cut;
  out.append(kEllipsis);
  out.append(tail, cut);
  return out;
}

void add_failure(TestReport& report, TestFailure failure) {
  ++report.failed;
  if (report.failures.size() >= kMaxReportFailures) {
    report.failures_truncated = true;
    return;
  }
  report.failures.push_back(std::move(failure));
}

std::optional<int> parse_line_number(std::string_view digits) {
  digits = trim(digits);
  if (digits.empty() || digits.size() > 9) return std::nullopt;
  int value = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + (c - '0');
  }
  return value;
}

}  // namespace detail

Result<TestReport> parse_report(std::string_view format, std::string_view data) {
  if (format == "junit") return parse_junit(data);
  if (format == "tap") return parse_tap(data);
  return fail(Errc::invalid_argument,
              fmt::format("unknown test report format \"{}\": use \"junit\" or \"tap\"",
                          detail::clip_text(format, 64)));
}

nlohmann::json to_json(const TestReport& report) {
  auto failures = nlohmann::json::array();
  for (const auto& f : report.failures) {
    failures.push_back({{"name", f.name},
                        {"message", f.message},
                        {"file", f.file},
                        {"line", f.line ? nlohmann::json(*f.line) : nlohmann::json(nullptr)}});
  }
  nlohmann::json out = {{"passed", report.passed},
                        {"failed", report.failed},
                        {"skipped", report.skipped},
                        {"failures", std::move(failures)}};
  if (report.failures_truncated) out["failures_truncated"] = true;
  return out;
}

}  // namespace kiln::traces
