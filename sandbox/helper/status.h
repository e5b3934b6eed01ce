// The status fd: one JSON line per setup step, so kiln can tell the user exactly which step of the
// isolation failed and why (bubblewrap's --json-status-fd, made mandatory).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "sandbox/helper/step_error.h"

namespace kiln::helper {

class Status {
 public:
  explicit Status(int fd) : fd_(fd) {}
  void ok(const std::string& step, const nlohmann::json& extra = nlohmann::json::object());
  void failed(const StepError& e);
  void close();
  int fd() const { return fd_; }
  // After fork the outer keeps no copy: pid 1 alone writes the rest of the lines.
  void forget() { fd_ = -1; }

 private:
  int fd_;
};

// JSON text that never throws: invalid UTF-8 from paths or argv is replaced, not fatal.
std::string dump_json(const nlohmann::json& j);

}  // namespace kiln::helper
