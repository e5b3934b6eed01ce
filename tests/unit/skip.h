// "Cannot run here" for doctest cases: doctest applies a case's decorators when it registers the
// case (static initialisation), so a runtime condition is decided once, before main, and handed to
// doctest::skip; the case is then reported as skipped, where an early return would count as a pass.
//   TEST_CASE("x" * doctest::skip(kiln::test::skip_because("root cases", why_not_root())))
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace kiln::test {

// KILN_REQUIRE_SANDBOX=1 (CI, set by .ci/run): a sandbox that cannot start is a failure, not a skip.
inline bool sandbox_required() {
  const char* v = std::getenv("KILN_REQUIRE_SANDBOX");
  return v != nullptr && std::string_view(v) == "1";
}

// True (skip) when `why` is non-empty, saying so on stderr. Call it once per reason (from a
// function-local static); ctest keeps the line in Testing/Temporary/LastTest.log, where
// scripts/run-tests.sh finds it next to the names of the skipped cases.
inline bool skip_because(const char* what, const std::string& why) {
  if (why.empty()) return false;
  std::fprintf(stderr, "[kiln] SKIP %s: %s\n", what, why.c_str());
  return true;
}

}  // namespace kiln::test
