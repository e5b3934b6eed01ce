// A family of resources served under its own URI prefix by a layer above mcp/ (kiln://trace/ from
// tools/trace_resources.h). The composition root puts them in ServerContext, so the session and
// resources/* know resources in general and no trace, run or tool in particular.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace kiln::server {

class SessionState;
struct OpenWorkspace;

struct ResourceProvider {
  std::string prefix;           // every URI of the family starts with it ("kiln://trace/")
  nlohmann::json uri_template;  // its entry in resources/templates/list
  // Its entries on resources/list's first page, for the session's current workspace.
  std::function<std::vector<nlohmann::json>(const SessionState& session, const OpenWorkspace& current)> list;
  // The document at `uri` (sent as application/json text), or why there is none: the error's
  // message follows "Resource not found: " in the reply.
  std::function<Result<nlohmann::json>(const SessionState& session, const std::string& uri)> read;
  // Optional: calls `changed(uri)` whenever a resource of the family changes (subscribed sessions
  // hear notifications/resources/updated); returns a token for unwatch.
  std::function<int(std::function<void(const std::string& uri)> changed)> watch;
  std::function<void(int token)> unwatch;
};

}  // namespace kiln::server
