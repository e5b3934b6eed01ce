// The shared endings of cli/report.h.
#include "cli/report.h"

#include <cstdio>

#include <nlohmann/json.hpp>

namespace kiln::cli {

int report(const Error& e) {
  std::fprintf(stderr, "kiln: %s\n", e.message.c_str());
  return e.code == Errc::invalid_argument ? kExitUsage : kExitError;
}

int usage(const std::string& message) {
  std::fprintf(stderr, "kiln: %s\n", message.c_str());
  return kExitUsage;
}

std::string dump_json(const nlohmann::json& j, int indent) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace kiln::cli
