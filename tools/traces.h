// Shared by the trace tools, the verify tool and the kiln://trace resources.
#pragma once

#include <cstddef>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "traces/trace_store.h"

namespace kiln::sandbox { class SandboxManager; }

namespace kiln::services { class ServiceHost; }

namespace kiln::server {

class RunTracer;
class ToolRegistry;

// One line of trace_list: id, kind, name, status, parent, command, times, exit, uri.
nlohmann::json trace_summary(const traces::TraceRecord& r);
// trace_get's answer: the record, a verify's children, an exec's output tails and how to page.
// Another principal's trace is "no trace", word for word as a missing one.
Result<nlohmann::json> trace_document(traces::TraceStore& store, const std::string& id, std::size_t tail_bytes,
                                      const std::string& principal);

// Whether `principal` may read a trace: its own, or one from before principals were recorded
// (those were all the local user's).
bool trace_visible_to(const traces::TraceRecord& r, const std::string& principal);
// The listing filter that shows `principal` exactly the traces trace_visible_to allows.
traces::PrincipalFilter traces_of(const std::string& principal);
// The error for a trace id the caller may not see or that does not exist: one text for both.
Error no_such_trace(const std::string& id);

void register_verify_tool(ToolRegistry& registry, RunTracer& tracer, sandbox::SandboxManager& sandboxes,
                          services::ServiceHost* services);

}  // namespace kiln::server
