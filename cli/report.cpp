// The shared endings of cli/report.h.
#include "cli/report.h"

#include <fmt/format.h>

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

std::string human_bytes(std::uint64_t n) {
  if (n < 1024) return fmt::format("{} B", n);
  if (n < 1024ull * 1024) return fmt::format("{:.1f} KiB", double(n) / 1024);
  if (n < 1024ull * 1024 * 1024) return fmt::format("{:.1f} MiB", double(n) / (1024.0 * 1024));
  return fmt::format("{:.2f} GiB", double(n) / (1024.0 * 1024 * 1024));
}

std::string when(const std::string& iso) {
  if (iso.size() >= 19 && iso[10] == 'T') return iso.substr(0, 10) + " " + iso.substr(11, 8);
  return iso;
}

}  // namespace kiln::cli
