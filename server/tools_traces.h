// Shared by the trace tools, the verify tool and the kiln://trace resources.
#pragma once

#include <cstddef>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "traces/trace_store.h"

namespace kiln::sandbox { class SandboxManager; }

namespace kiln::server {

class RunTracer;
class ToolRegistry;

// One line of trace_list: id, kind, name, status, parent, command, times, exit, uri.
nlohmann::json trace_summary(const traces::TraceRecord& r);
// trace_get's answer: the record, a verify's children, an exec's output tails and how to page.
Result<nlohmann::json> trace_document(traces::TraceStore& store, const std::string& id, std::size_t tail_bytes);

void register_verify_tool(ToolRegistry& registry, RunTracer& tracer, sandbox::SandboxManager& sandboxes);

}  // namespace kiln::server
