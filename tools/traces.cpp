// trace_list, trace_get, trace_output: reading the record of every run (exec, verify, publish)
// from the trace store. Everything in the store is already redacted.
#include <fmt/format.h>

#include "sandbox/output_spool.h"
#include "mcp/principal.h"
#include "runs/run_tracing.h"
#include "mcp/session_state.h"
#include "mcp/tool_registry.h"
#include "tools/tools.h"
#include "tools/traces.h"
#include "traces/trace_store.h"

namespace kiln::server {

// The kinds whose trace holds a process's output: a command, a service's, an app's or a schedule run's.
static bool has_output(const traces::TraceRecord& r) {
  return r.kind == "exec" || r.kind == "service" || r.kind == "app" || r.kind == "schedule";
}

using nlohmann::json;

json trace_summary(const traces::TraceRecord& r) {
  json j = {{"trace_id", r.id},
            {"kind", r.kind},
            {"name", r.name},
            {"status", r.status},
            {"parent_id", r.parent_id ? json(*r.parent_id) : json(nullptr)},
            {"workspace", r.workspace_id},
            {"command", r.command},
            {"started_at", r.started_at},
            {"ended_at", r.ended_at ? json(*r.ended_at) : json(nullptr)},
            {"duration_ms", r.duration_ms ? json(*r.duration_ms) : json(nullptr)},
            {"exit_code", r.exit_code ? json(*r.exit_code) : json(nullptr)},
            {"stop_reason", r.stop_reason},
            {"uri", trace_uri(r.id)}};
  if (!r.tests.is_null()) j["tests"] = {{"passed", r.tests.value("passed", 0)},
                                        {"failed", r.tests.value("failed", 0)},
                                        {"skipped", r.tests.value("skipped", 0)}};
  return j;
}

bool trace_visible_to(const traces::TraceRecord& r, const std::string& principal) {
  return r.principal.empty() ? principal == local_principal() : r.principal == principal;
}

traces::PrincipalFilter traces_of(const std::string& principal) {
  return traces::PrincipalFilter{principal, principal == local_principal()};
}

Error no_such_trace(const std::string& id) {
  return Error{Errc::not_found, fmt::format("no trace '{}': use a trace_id from sandbox_exec, verify or trace_list", id)};
}

Result<json> trace_document(traces::TraceStore& store, const std::string& id, std::size_t tail_bytes,
                            const std::string& principal) {
  auto rec = store.get(id);
  if (!rec) return std::unexpected(rec.error());
  if (!*rec || !trace_visible_to(**rec, principal)) return std::unexpected(no_such_trace(id));
  json out = {{"trace", traces::to_json(**rec)}, {"uri", trace_uri(id)}};
  if ((*rec)->kind == "verify") {
    traces::TraceQuery q;
    q.who = traces_of(principal);
    q.parent_id = id;
    q.limit = 500;
    if (auto kids = store.list(q)) {
      json children = json::array();
      // Steps in the order they ran (the store lists newest first).
      for (auto it = kids->records.rbegin(); it != kids->records.rend(); ++it) children.push_back(trace_summary(*it));
      out["children"] = std::move(children);
    }
  }
  if (has_output(**rec) && tail_bytes > 0) {
    for (const char* stream : {"stdout", "stderr"}) {
      auto slice = store.read_output(id, stream, -static_cast<std::int64_t>(tail_bytes), tail_bytes);
      std::string text;
      if (slice) {
        // Starting mid-character: drop the continuation bytes rather than show U+FFFD.
        std::size_t skip = 0;
        if (slice->offset > 0)
          while (skip < slice->data.size() && skip < 3 && (static_cast<unsigned char>(slice->data[skip]) & 0xC0) == 0x80) ++skip;
        text = sandbox::sanitize_utf8(std::string_view(slice->data).substr(skip));
        out[std::string(stream) + "_total_bytes"] = slice->total_bytes;
      }
      out[std::string(stream) + "_tail"] = std::move(text);
    }
    out["how_to_page"] = fmt::format("trace_output {{\"trace_id\": \"{}\", \"stream\": \"stdout\", \"offset\": 0}} reads "
                                     "the full output; add \"grep\": \"PATTERN\" to find lines",
                                     id);
  }
  return out;
}

namespace {

Result<ToolOutput> trace_list(CallContext& ctx, RunTracer& tracer, const json& args) {
  auto ws = ctx.session->workspace_for(args);
  if (!ws) return std::unexpected(ws.error());
  traces::TraceQuery q;
  q.workspace_id = (*ws)->id;
  q.kind = args.value("kind", "");
  q.status = args.value("status", "");
  q.since = args.value("since", "");
  q.parent_id = args.value("parent", "");
  q.roots_only = q.parent_id.empty();
  args.at("limit").get_to(q.limit);
  q.cursor = args.value("cursor", "");
  q.who = traces_of(ctx.session->principal());
  auto page = tracer.store().list(q);
  if (!page) return std::unexpected(page.error());
  json list = json::array();
  for (const auto& r : page->records) list.push_back(trace_summary(r));
  return ToolOutput{json{{"workspace", (*ws)->id}, {"traces", std::move(list)}, {"next_cursor", page->next_cursor}}};
}

Result<ToolOutput> trace_get(CallContext& ctx, RunTracer& tracer, const json& args) {
  const std::string id = args.at("trace_id");
  auto doc = trace_document(tracer.store(), id, args.at("tail_bytes").get<std::size_t>(), ctx.session->principal());
  if (!doc) return std::unexpected(doc.error());
  return ToolOutput{std::move(*doc)};
}

Result<ToolOutput> trace_output(CallContext& ctx, RunTracer& tracer, const json& args) {
  const std::string id = args.at("trace_id");
  const std::string stream = args.at("stream");
  const std::int64_t offset = args.at("offset");
  auto rec = tracer.store().get(id);
  if (!rec) return std::unexpected(rec.error());
  if (!*rec || !trace_visible_to(**rec, ctx.session->principal())) return std::unexpected(no_such_trace(id));
  if ((*rec)->kind == "verify")
    return fail(Errc::invalid_argument,
                fmt::format("trace {} is a verify: its output lives in its steps; list them with trace_get (children)", id));
  if (!has_output(**rec))  // a service's or app's trace holds its log
    return fail(Errc::invalid_argument,
                fmt::format("trace {} is a {}: it has no output; trace_get shows what it did", id, (*rec)->kind));
  const bool running = (*rec)->status == "running";
  if (args.contains("grep")) {
    if (offset < 0) return fail(Errc::invalid_argument, "with grep, offset must be 0 or a next_offset from an earlier call");
    // `limit` has no schema default: it counts lines here (100) and bytes below (65536).
    auto g = tracer.store().grep_output(id, stream, args["grep"].get<std::string>(), std::uint64_t(offset),
                                        args.value("limit", 100));
    if (!g) return std::unexpected(g.error());
    json matches = json::array();
    for (const auto& m : g->matches) {
      std::string text = sandbox::sanitize_utf8(m.text);
      matches.push_back({{"line_number", m.line_number}, {"offset", m.offset}, {"text", std::move(text)},
                         {"truncated", m.truncated}});
    }
    return ToolOutput{json{{"trace_id", id}, {"stream", stream}, {"matches", std::move(matches)}, {"offset", offset},
                           {"next_offset", g->next_offset}, {"total_bytes", g->total_bytes}, {"eof", g->eof},
                           {"running", running}}};
  }
  auto slice = tracer.store().read_output(id, stream, offset, args.value("limit", std::size_t{65536}));
  if (!slice) return std::unexpected(slice.error());
  std::string raw = std::move(slice->data);
  // Never split a character between pages: hold back a cut sequence for the next page.
  std::size_t cut = slice->next_offset < slice->total_bytes || running ? sandbox::utf8_incomplete_tail(raw) : 0;
  if (cut == raw.size()) cut = 0;
  raw.resize(raw.size() - cut);
  std::uint64_t next = slice->offset + raw.size();
  json out = {{"trace_id", id},      {"stream", stream},
              {"data", sandbox::sanitize_utf8(raw)},
              {"offset", slice->offset}, {"next_offset", next},
              {"total_bytes", slice->total_bytes},
              {"eof", !running && next >= slice->total_bytes},
              {"running", running}};
  return ToolOutput{std::move(out)};
}

template <class F>
ToolHandler bind(RunTracer& tracer, F f) {
  return [&tracer, f](CallContext& ctx, const json& args) { return f(ctx, tracer, args); };
}

}  // namespace

void register_trace_tools(ToolRegistry& registry, RunTracer& tracer, sandbox::SandboxManager& sandboxes,
                          services::ServiceHost* services) {
  registry.add("trace_list", bind(tracer, trace_list));
  registry.add("trace_get", bind(tracer, trace_get));
  registry.add("trace_output", bind(tracer, trace_output));
  register_verify_tool(registry, tracer, sandboxes, services);
}

}  // namespace kiln::server
