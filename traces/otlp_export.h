// A trace record (and a verify's steps) as OpenTelemetry OTLP/JSON, so runs can be looked at in
// Jaeger, Tempo or anything else that takes an ExportTraceServiceRequest over OTLP/HTTP JSON.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "traces/trace_store.h"

namespace kiln::traces {

// One resourceSpans / scopeSpans holding a span for `root` and one per child.
// Ids, so the same record always exports to the same span and re-imports deduplicate:
//  - traceId: FNV-1a 64 of "kiln.trace\x1f" + root.id, then of "kiln.trace\x1e" + root.id, as 32
//    lowercase hex digits (no secret is hidden in a Kiln id, so a non-cryptographic hash is enough);
//  - spanId: the 16 hex digits of a "tr_<16 hex>" id, so a span names its record at a glance; any
//    other id shape is hashed the same way as the traceId (first half only).
// The root never gets a parentSpanId (its parent would not be in the export); a child points at
// its parent_id, or at the root when it has none. A record without an end (running) ends at its
// start and carries kiln.running=true. Strings are valid UTF-8 (bad bytes become U+FFFD).
// service_version goes into service.version and the scope version when not empty.
nlohmann::json to_otlp(const TraceRecord& root, const std::vector<TraceRecord>& children,
                       std::string_view service_version = {});

// The span id to_otlp gives the record with this id.
std::string otlp_span_id(std::string_view trace_id);
// The traceId to_otlp gives an export whose root has this id.
std::string otlp_trace_id(std::string_view root_trace_id);

}  // namespace kiln::traces
