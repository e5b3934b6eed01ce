// How the store commands (traces, publish, artifacts) end: one message on stderr and one exit-code
// rule, and JSON on stdout that invalid UTF-8 (in a command line, in output) cannot break half-way.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "core/error.h"

namespace kiln::cli {

inline constexpr int kExitError = 1;  // not found, or failed
inline constexpr int kExitUsage = 2;  // the command line asked for something impossible

// Prints "kiln: MESSAGE"; returns kExitUsage for an invalid argument, else kExitError.
int report(const Error& e);
// Prints "kiln: MESSAGE"; returns kExitUsage.
int usage(const std::string& message);

// `j` as text (indent -1: one line), invalid UTF-8 replaced.
std::string dump_json(const nlohmann::json& j, int indent = 2);

// For people: "1.5 MiB"; and an ISO 8601 time as "YYYY-MM-DD HH:MM:SS".
std::string human_bytes(std::uint64_t n);
std::string when(const std::string& iso);

}  // namespace kiln::cli
