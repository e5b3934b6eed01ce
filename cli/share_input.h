// What `kiln publish` and `kiln artifacts share` both take from the user: --share's mode, the
// password of --password-stdin, and the invite links they print back.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "artifacts/artifact_store.h"
#include "core/error.h"

namespace kiln::cli {

// The longest --expires-in and --invite-expires-in: ten years.
inline constexpr std::int64_t kMaxExpiresInS = std::int64_t(10) * 365 * 24 * 3600;

// One line from stdin; on a terminal it is asked for without echo. Never logged or printed.
Result<std::string> read_password();

// --share's value; empty: no change asked for. A bad one is an invalid_argument (exit 2).
Result<std::optional<artifacts::Share>> parse_share_option(const std::string& share);

// The links of invite_links() on stdout, one "NAME<TAB>URL" line each.
void print_invite_links(const nlohmann::json& invites);

}  // namespace kiln::cli
