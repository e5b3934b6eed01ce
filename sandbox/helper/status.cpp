// Status lines and the failure hints that go with them; the writes ignore errors because a reader
// that went away will find out from the exit code (125) anyway.
#include "sandbox/helper/status.h"

#include <cerrno>
#include <cstring>
#include <unistd.h>

#include "sandbox/helper/fd_util.h"

namespace kiln::helper {

std::string dump_json(const nlohmann::json& j) {
  try {
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  } catch (...) {
    return "{}";
  }
}

bool fail_errno(StepError& e, const std::string& step, const std::string& what, std::string hint) {
  int saved = errno;
  e.step = step;
  e.err = saved;
  e.message = what + ": " + std::strerror(saved);
  e.hint = std::move(hint);
  errno = saved;
  return false;
}

bool fail_plain(StepError& e, const std::string& step, const std::string& what, std::string hint) {
  e.step = step;
  e.err = 0;
  e.message = what;
  e.hint = std::move(hint);
  return false;
}

void Status::ok(const std::string& step, const nlohmann::json& extra) {
  if (fd_ < 0) return;
  nlohmann::json j = {{"step", step}, {"ok", true}};
  if (extra.is_object())
    for (auto it = extra.begin(); it != extra.end(); ++it) j[it.key()] = it.value();
  write_all(fd_, dump_json(j) + "\n");
}

void Status::failed(const StepError& e) {
  if (fd_ < 0) return;
  nlohmann::json j = {{"step", e.step}, {"ok", false}, {"errno", e.err}, {"error", e.message}};
  if (!e.hint.empty()) j["hint"] = e.hint;
  write_all(fd_, dump_json(j) + "\n");
}

void Status::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

}  // namespace kiln::helper
