// The caller's side of kiln serve's app control API (POST /_kiln/apps): the tools and the CLI ask
// the one supervisor of the state directory to deploy, stop, restart or report on an app.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace kiln::server {

// The largest control answer taken (a list of many apps with their schedules).
inline constexpr std::size_t kMaxControlAnswer = std::size_t(4) << 20;

// Makes sure kiln serve runs for `state_dir` (ensure_serve_running), then POSTs `request` to
// /_kiln/apps with `Authorization: Bearer TOKEN`, waiting at most timeout_ms for the answer.
// 200: the parsed JSON body. Otherwise an error carrying the body's "error" text:
// Errc::not_found for 404, invalid_argument for 400, io for anything else (no answer in time
// included). Blocks; call it off the event loop.
Result<nlohmann::json> call_serve_control(const std::string& state_dir, const std::string& token,
                                          const nlohmann::json& request, int timeout_ms);

}  // namespace kiln::server
