// A setup step's failure as the status fd reports it: which step, errno, what was tried and what the
// user can do about it. Every mechanism returns one of these instead of printing.
#pragma once

#include <string>

namespace kiln::helper {

struct StepError {
  std::string step;
  int err = 0;  // errno, 0 when the failure is not a syscall's
  std::string message;
  std::string hint;
};

// Fills `e` from errno at the call site; returns false so callers can `return fail(...)`.
bool fail_errno(StepError& e, const std::string& step, const std::string& what, std::string hint = {});
bool fail_plain(StepError& e, const std::string& step, const std::string& what, std::string hint = {});

}  // namespace kiln::helper
