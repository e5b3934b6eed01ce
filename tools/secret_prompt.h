// Secrets asked of the person (issue 20): before a run whose sandbox policy names a secret Kiln
// does not have, ask the person, through the client's URL-mode elicitation, to open a one-time page
// of kiln serve and type the value there. The value goes from the browser to Kiln's secret store;
// only the page's address passes through the client, and nothing of it reaches a result or a log.
#pragma once

#include "mcp/tool_registry.h"

namespace kiln::server {

// A preflight (ToolRegistry::set_preflight) for a tool whose sandbox comes from kiln.json's
// "sandbox" and, with `policy_args`, the call's own network/limits/secrets/isolation. A call with
// `sandbox_id` uses a sandbox that already has its secrets, and is left alone. Legacy era: sends
// elicitation/create (mode url) and waits for the page's value before the tool runs. Modern era:
// answers with the elicitations as inputRequests; the client calls again once the person is done.
// A client without URL elicitation gets the tool's own error, which names `kiln secret set`.
ToolPreflight secret_preflight(bool policy_args);

}  // namespace kiln::server
