// What a request method answers: a result object or a JSON-RPC error. Its own header so the task
// registry, which keeps results, needs none of the session's types.
#pragma once

#include <expected>
#include <string>

#include <nlohmann/json.hpp>

namespace kiln::server {

struct RpcError {
  int code;
  std::string message;
  nlohmann::json data = nullptr;
};

using MethodResult = std::expected<nlohmann::json, RpcError>;

}  // namespace kiln::server
