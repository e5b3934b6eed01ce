// The signals the helper sets to "ignore": kept in one list, because an ignored disposition is
// inherited across fork and execve, and every exec child must undo each of them (it resets only
// these, not all 64, which was most of its syscalls).
#pragma once

#include <csignal>

namespace kiln::helper {

// SIGPIPE: a write to a closed status pipe or control socket must fail, not kill the helper.
inline constexpr int kHelperIgnoredSignals[] = {SIGPIPE};

inline void ignore_helper_signals() {
  for (int sig : kHelperIgnoredSignals) ::signal(sig, SIG_IGN);
}

}  // namespace kiln::helper
