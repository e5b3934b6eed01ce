// An app's network (kiln.json app.network) as its sandbox gets it and as app_status and its traces
// report it: one place, so the web process, its schedules and what Kiln says about them agree.
#pragma once

#include <optional>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "sandbox/egress/egress_policy.h"
#include "workspace/kiln_config.h"

namespace kiln::server::apps {

// The `network` argument for sandbox::make_policy. "host" is refused here too: kiln.json refuses
// it at publish, but the stored version is read back from disk and the sandbox is the last check.
Result<nlohmann::json> app_network_arg(const AppConfig& config);

// The ceiling of the session that published the app, as its sandbox gets it. One that does not
// parse (a damaged store) allows nothing: fail closed.
std::optional<egress::Policy> app_publisher_ceiling(const AppConfig& config);

// What the app may reach: {"mode": "none"} or {"mode": "allowlist", allow, deny, allow_private,
// ceiling} with the server's --network-allow ceiling that narrows it.
nlohmann::json app_network_report(const AppConfig& config, const std::optional<egress::Policy>& ceiling);

}  // namespace kiln::server::apps
