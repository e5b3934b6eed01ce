// Fuzzes the TAP report parser verify reads (traces/report_tap.cpp, traces/tap_yaml.cpp).
#include "fuzz/fuzz_report_common.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto r = kiln::traces::parse_tap(text);
  if (r) kiln::fuzz::check_report(*r, "tap");
  auto via = kiln::traces::parse_report("tap", text);
  if (r.has_value() != via.has_value()) kiln::fuzz::violated("parse_report disagrees with parse_tap");
  return 0;
}
