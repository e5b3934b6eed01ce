// kiln://trace/ID as MCP resources: a run's record, the newest runs of the workspace in
// resources/list, and updates while a run's output grows. The composition root hands this
// family to the session (ServerContext::resources).
#pragma once

#include "mcp/resource_provider.h"

namespace kiln::traces { class TraceStore; }

namespace kiln::server {

class TraceHub;

// `hub` may be null (no updates); both must outlive every session.
ResourceProvider trace_resources(traces::TraceStore& store, TraceHub* hub);

}  // namespace kiln::server
