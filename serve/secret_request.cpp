// request_secret_page over the control client: op secret_request, its answer checked before a
// tool hands the URL on.
#include "serve/secret_request.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "serve/control_client.h"

namespace kiln::server {

Result<SecretPageRequest> request_secret_page(const std::string& state_dir, const std::string& token,
                                              const std::string& name, int timeout_ms, const std::string& asked_by) {
  nlohmann::json request = {{"op", "secret_request"}, {"name", name}};
  if (!asked_by.empty()) request["asked_by"] = asked_by;
  auto answer = call_serve_control(state_dir, token, request, timeout_ms);
  if (!answer) return std::unexpected(answer.error());
  const auto& j = *answer;
  if (!j.contains("url") || !j["url"].is_string() || !j.contains("expires_in_s") || !j["expires_in_s"].is_number_integer())
    return fail(Errc::io, fmt::format("kiln serve answered the secret page request for {} without the page's url "
                                      "and expires_in_s",
                                      name));
  return SecretPageRequest{j["url"].get<std::string>(), j["expires_in_s"].get<int>()};
}

}  // namespace kiln::server
