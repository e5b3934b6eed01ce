// Leaving a process with std::_Exit (no destructors: threads that ignored cancellation may still
// hold the objects they use) also skips LeakSanitizer's at-exit check. In sanitizer builds this
// runs that check first, so "no leak at exit" is still checked on the paths kiln really takes.
#pragma once

#include <cstdlib>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

namespace kiln {

[[noreturn]] inline void fast_exit(int code) {
#if defined(__SANITIZE_ADDRESS__)
  // Memory still reachable from a running thread, a stack or a global is not a leak; anything
  // unreachable is reported and the process dies with LeakSanitizer's exit code instead of `code`.
  __lsan_do_leak_check();
#endif
  std::_Exit(code);
}

}  // namespace kiln
