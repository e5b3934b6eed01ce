// The signals the helper sets to "ignore": kept in one list, because an ignored disposition is
// inherited across fork and execve, and every exec child must undo each of them (it resets only
// these, not all 64, which was most of its syscalls).
#pragma once

#include <csignal>

#include "core/signal_reset.h"

namespace kiln::helper {

// SIGPIPE: a write to a closed status pipe or control socket must fail, not kill the helper.
inline constexpr int kHelperIgnoredSignals[] = {SIGPIPE};

// At start: every disposition back to the default (whoever started the helper may have ignored
// some, and an ignored signal would reach the commands), then the helper's own list ignored.
inline void ignore_helper_signals() {
  // Through the raw syscall: glibc's signal() cannot reset 32 and 33 (core/signal_reset.h).
  reset_all_signal_dispositions();
  for (int sig : kHelperIgnoredSignals) ::signal(sig, SIG_IGN);
}

}  // namespace kiln::helper
