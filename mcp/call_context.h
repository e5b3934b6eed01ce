// What a request handler may see and do while it runs: its cancellation, progress and logging,
// and the session it belongs to. Handlers receive it by reference and never outlive the request.
#pragma once

#include <chrono>
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

  // The request's era and what the client said it can do (its _meta, or its initialize).
  bool modern = false;
  nlohmann::json client_capabilities = nlohmann::json::object();
  // Legacy era only: sends a request to the client (elicitation/create) and waits for its answer,
  // the request's cancellation or `timeout`. Empty when the request cannot ask (modern era, task).
  std::function<std::optional<nlohmann::json>(const std::string& method, nlohmann::json params,
                                              std::chrono::milliseconds timeout)> ask_client;
  // Modern era: the retry's params.inputResponses (what the client answered to an earlier
  // input_required result), {} on a first call.
  nlohmann::json input_responses = nlohmann::json::object();
  // Legacy era only: sends a notification to the client (notifications/elicitation/complete).
  std::function<void(const std::string& method, nlohmann::json params)> notify;

  // Sends notifications/progress when the request carried a progressToken; a no-op otherwise.
  // `progress` must grow between calls; the session drops calls that would break that rule.
  std::function<void(double progress, std::optional<double> total, std::string_view message)> progress;
  // Sends notifications/message to the client, filtered by the level the client set.
  std::function<void(std::string_view level, std::string_view text)> log;

  bool cancelled() const { return stop.stop_requested(); }
};

}  // namespace kiln::server
