// The checks fuzz_junit and fuzz_tap share: a parsed report stays within the bounds verify
// promises (failure count, message size) and always encodes as valid JSON.
#pragma once

#include "fuzz/fuzz_support.h"
#include "traces/test_report.h"

namespace kiln::fuzz {

inline void check_report(const traces::TestReport& r, std::string_view format) {
  if (r.format != format) violated("report format", r.format);
  if (r.failures.size() > traces::kMaxReportFailures) violated("too many failures kept");
  if (r.failures.size() > r.failed) violated("more failures listed than counted");
  if (r.failures_truncated && r.failures.size() < traces::kMaxReportFailures) violated("truncated below the cap");
  for (const auto& f : r.failures) {
    // A few bytes of slack for an ellipsis or the UTF-8 tail the cut keeps whole.
    if (f.message.size() > traces::kMaxFailureMessageBytes + 16) violated("failure message too long");
    if (f.line && *f.line < 0) violated("negative line");
  }
  // Strict encoding: invalid UTF-8 in any field throws here.
  auto j = traces::to_json(r);
  std::string text = j.dump();
  if (!nlohmann::json::accept(text)) violated("to_json output does not parse");
}

}  // namespace kiln::fuzz
