// Fuzzes the JUnit XML report parser verify reads (traces/report_junit.cpp).
#include "fuzz/fuzz_report_common.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view xml(reinterpret_cast<const char*>(data), size);
  auto r = kiln::traces::parse_junit(xml);
  if (r) kiln::fuzz::check_report(*r, "junit");
  auto via = kiln::traces::parse_report("junit", xml);
  if (r.has_value() != via.has_value()) kiln::fuzz::violated("parse_report disagrees with parse_junit");
  return 0;
}
