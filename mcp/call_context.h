// What a request handler may see and do while it runs: its cancellation, progress and logging,
// and the session it belongs to. Handlers receive it by reference and never outlive the request.
#pragma once

#include <functional>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace kiln::server {

class SessionState;

struct CallContext {
  nlohmann::json request_id;                  // the JSON-RPC id of the request being served
  std::optional<nlohmann::json> progress_token;
  std::stop_token stop;                       // requested on notifications/cancelled or shutdown
  SessionState* session = nullptr;            // workspace selection, client identity

  // Sends notifications/progress when the request carried a progressToken; a no-op otherwise.
  // `progress` must grow between calls; the session drops calls that would break that rule.
  std::function<void(double progress, std::optional<double> total, std::string_view message)> progress;
  // Sends notifications/message to the client, filtered by the level the client set.
  std::function<void(std::string_view level, std::string_view text)> log;

  bool cancelled() const { return stop.stop_requested(); }
};

}  // namespace kiln::server
