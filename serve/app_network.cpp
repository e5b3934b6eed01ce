// An app's network for its sandbox and for reports; see app_network.h.
#include "serve/app_network.h"

#include <fmt/format.h>

namespace kiln::server::apps {

using nlohmann::json;

Result<json> app_network_arg(const AppConfig& config) {
  const json& n = config.network;
  if (n.is_object()) return n;
  // An app sandbox always has its loopback up (hosts_services), so "loopback" is "none".
  if (n == "none" || n == "loopback") return json("none");
  return fail(Errc::invalid_argument,
              fmt::format("app.network {} is refused: an app gets \"none\" or an allowlist object, never the host's "
                          "network",
                          n.dump().substr(0, 100)));
}

std::optional<egress::Policy> app_publisher_ceiling(const AppConfig& config) {
  if (config.network_ceiling.is_null()) return std::nullopt;
  auto p = egress::parse_policy(config.network_ceiling, "network_ceiling");
  return p ? std::move(*p) : egress::Policy{};
}

json app_network_report(const AppConfig& config, const std::optional<egress::Policy>& ceiling) {
  if (!config.network.is_object())
    return json{{"mode", "none"}, {"reach", "the app's own loopback only (its port and its services); nothing leaves"}};
  auto p = egress::parse_policy(config.network, "app.network");
  if (!p) return json{{"mode", "allowlist"}, {"error", p.error().message}};
  json j = egress::Scope{*p, ceiling, app_publisher_ceiling(config)}.to_json();
  j["mode"] = "allowlist";
  j["reach"] = "only these destinations, through Kiln's egress proxy (HTTP_PROXY, HTTPS_PROXY in the web process and "
               "every schedule)";
  return j;
}

}  // namespace kiln::server::apps
