// The trace resource family: what trace_get returns, as a resource a client can read and follow.
#include "tools/trace_resources.h"

#include <fmt/format.h>

#include "mcp/session_state.h"
#include "runs/trace_hub.h"
#include "tools/traces.h"
#include "traces/trace_store.h"

namespace kiln::server {

namespace {

using nlohmann::json;

constexpr std::string_view kTracePrefix = "kiln://trace/";
constexpr int kListedTraces = 20;  // the newest of the current workspace, in resources/list

}  // namespace

ResourceProvider trace_resources(traces::TraceStore& store, TraceHub* hub) {
  ResourceProvider p;
  p.prefix = std::string(kTracePrefix);
  p.uri_template = {{"uriTemplate", std::string(kTracePrefix) + "{id}"},
                    {"name", "trace"},
                    {"title", "Trace of a run"},
                    {"description", "The record of one exec, verify or publish (as trace_get returns it); "
                                    "subscribe to hear as a running one's output grows and when it ends"},
                    {"mimeType", "application/json"}};
  p.list = [&store](const SessionState& session, const OpenWorkspace& current) {
    std::vector<json> out;
    traces::TraceQuery q;
    q.workspace_id = current.id;
    q.roots_only = true;
    q.limit = kListedTraces;
    q.who = traces_of(session.principal());
    if (auto page = store.list(q)) {
      for (const auto& t : page->records)
        out.push_back({{"uri", std::string(kTracePrefix) + t.id},
                       {"name", t.id},
                       {"title", fmt::format("{} {} ({})", t.kind, t.name.empty() ? t.command.substr(0, 60) : t.name, t.status)},
                       {"mimeType", "application/json"}});
    }
    return out;
  };
  p.read = [&store](const SessionState& session, const std::string& uri) -> Result<json> {
    return trace_document(store, uri.substr(kTracePrefix.size()), 4096, session.principal());
  };
  if (hub) {
    p.watch = [hub](std::function<void(const std::string&)> changed) {
      return hub->listen([changed = std::move(changed)](const std::string& trace_id) {
        changed(std::string(kTracePrefix) + trace_id);
      });
    };
    p.unwatch = [hub](int token) { hub->unlisten(token); };
  }
  return p;
}

}  // namespace kiln::server
