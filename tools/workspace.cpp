// workspace_open, workspace_list, workspace_info: thin handlers over the state store.
#include <filesystem>
#include <fmt/format.h>

#include "sandbox/manager.h"
#include "artifacts/artifact_store.h"
#include "mcp/session_state.h"
#include "mcp/tool_registry.h"
#include "tools/apps.h"
#include "tools/publish.h"
#include "tools/tools.h"
#include "tools/traces.h"
#include "mcp/workspace_opening.h"
#include "workspace/kiln_config.h"
#include "traces/trace_store.h"
#include "workspace/state_store.h"

namespace kiln::server {

namespace {

using nlohmann::json;

bool valid_managed_name(const std::string& name) {
  if (name.empty() || name.size() > 64 || name == "." || name == "..") return false;
  for (char c : name) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) return false;
  }
  return true;
}

void add_config(json& out, const workspace::Root& root) {
  LoadedConfig cfg = load_config(root);
  out["config"] = std::move(cfg.config);
  out["config_source"] = cfg.source;
  if (!cfg.error.empty()) out["config_error"] = cfg.error;
  // The services kiln.json declares, as sandbox_create {services} would start them.
  json services = json::array();
  if (cfg.typed)
    for (const auto& s : cfg.typed->services) {
      json j = {{"name", s.name}, {"kind", to_string(s.kind)}, {"port", s.port}};
      if (!s.display.empty()) j["run"] = s.display;
      if (!s.ready_path.empty()) j["ready"] = s.ready_path;
      if (!s.setup_display.empty()) j["setup"] = s.setup_display;
      if (!s.description.empty()) j["description"] = s.description;
      services.push_back(std::move(j));
    }
  out["services"] = std::move(services);
}

Result<ToolOutput> workspace_open(CallContext& ctx, const json& args) {
  // path and name are optional without a default (one of them must be given); create has one.
  std::string path = args.value("path", "");
  std::string name = args.value("name", "");
  const bool create = args.at("create");
  if (path.empty() && name.empty()) {
    return fail(Errc::invalid_argument,
                "pass `path` (absolute folder path) to open a folder, or `name` to reopen a known workspace");
  }
  auto& store = ctx.session->store();
  if (path.empty()) {
    auto rec = store.find_workspace(name);
    if (!rec) return std::unexpected(rec.error());
    if (*rec) {
      path = (*rec)->root;
      name.clear();  // keep its recorded name
    } else if (create) {
      if (!valid_managed_name(name)) {
        return fail(Errc::invalid_argument,
                    fmt::format("'{}' cannot name a managed workspace folder: use letters, digits, '-', '_' or '.'", name));
      }
      path = store.dir() + "/workspaces/" + name;
    } else {
      return fail(Errc::not_found, fmt::format("no workspace named '{}': call workspace_list to see known ones, pass "
                                               "`path` to open a folder, or add create: true to make a new one",
                                               name));
    }
  }
  auto opened = open_workspace_folder(*ctx.session, path, name, create);
  if (!opened) return std::unexpected(opened.error());
  const auto& r = opened->record;
  json out = {{"id", r.id}, {"name", r.name}, {"root", r.root}, {"created_at", r.created_at},
              {"last_opened_at", r.last_opened_at}, {"is_new", opened->is_new}};
  add_config(out, *opened->workspace->root);
  return ToolOutput{std::move(out)};
}

Result<ToolOutput> workspace_list(CallContext& ctx, const json&) {
  auto list = ctx.session->store().list_workspaces();
  if (!list) return std::unexpected(list.error());
  json items = json::array();
  for (const auto& r : *list) {
    std::error_code ec;
    items.push_back({{"id", r.id}, {"name", r.name}, {"root", r.root}, {"created_at", r.created_at},
                     {"last_opened_at", r.last_opened_at}, {"exists", std::filesystem::is_directory(r.root, ec)}});
  }
  json out = {{"workspaces", std::move(items)}};
  if (auto cur = ctx.session->current()) out["current"] = cur->id;
  return ToolOutput{std::move(out)};
}

artifacts::ArtifactStore* g_artifacts = nullptr;
sandbox::SandboxManager* g_sandboxes = nullptr;  // set at registration; outlives every session
traces::TraceStore* g_traces = nullptr;

// Counts of the workspace's traces by status, and its last verify in brief.
void add_traces(json& out, const std::string& workspace_id, const std::string& principal) {
  out["traces"] = {{"total", 0}};
  out["last_verify"] = nullptr;
  if (!g_traces) return;
  if (auto c = g_traces->count(workspace_id, traces_of(principal))) out["traces"] = traces::to_json(*c);
  traces::TraceQuery q;
  q.who = traces_of(principal);
  q.workspace_id = workspace_id;
  q.kind = "verify";
  q.limit = 1;
  if (auto page = g_traces->list(q); page && !page->records.empty()) {
    const auto& v = page->records.front();
    out["last_verify"] = {{"trace_id", v.id},          {"status", v.status},
                          {"started_at", v.started_at}, {"ended_at", v.ended_at ? json(*v.ended_at) : json(nullptr)},
                          {"tests", v.tests},          {"summary", v.result.is_object() ? v.result.value("summary", "") : ""}};
  }
}

// A short line per artifact published from the workspace; publish_list has the versions and invites.
json artifacts_of(const std::string& workspace_id) {
  json out = json::array();
  if (!g_artifacts) return out;
  auto list = g_artifacts->list(workspace_id);
  if (!list || list->empty()) return out;
  ServeBase base = serve_base(g_artifacts->dir(), false);
  auto apps = app_states(g_artifacts->dir(), *list);
  for (const auto& a : *list) {
    json j = {{"name", a.name},
              {"share", artifacts::to_string(a.share)},
              {"url", artifact_url(base.url, a.name)},
              {"latest", a.latest()},
              {"versions", a.versions.size()},
              {"expired", a.expired}};
    if (auto it = apps.find(a.name); it != apps.end()) j["app"] = it->second;
    out.push_back(std::move(j));
  }
  return out;
}

Result<ToolOutput> workspace_info(CallContext& ctx, const json& args) {
  auto ws = ctx.session->workspace_for(args);
  if (!ws) return std::unexpected(ws.error());
  auto rec = ctx.session->store().find_workspace((*ws)->id);
  if (!rec) return std::unexpected(rec.error());
  auto cur = ctx.session->current();
  json out = {{"id", (*ws)->id}, {"name", (*ws)->name}, {"root", (*ws)->root->path()},
              {"is_current", cur && cur->id == (*ws)->id},
              {"sandboxes", g_sandboxes ? g_sandboxes->list(ctx.session->principal(), (*ws)->id) : json::array()},
              {"artifacts", artifacts_of((*ws)->id)}};
  add_traces(out, (*ws)->id, ctx.session->principal());
  if (*rec) {
    out["created_at"] = (*rec)->created_at;
    out["last_opened_at"] = (*rec)->last_opened_at;
  }
  add_config(out, *(*ws)->root);
  return ToolOutput{std::move(out)};
}

}  // namespace

void register_workspace_tools(ToolRegistry& registry, sandbox::SandboxManager* sandboxes,
                              traces::TraceStore* trace_store, artifacts::ArtifactStore* artifact_store) {
  g_artifacts = artifact_store;
  g_sandboxes = sandboxes;
  g_traces = trace_store;
  registry.add("workspace_open", workspace_open);
  registry.add("workspace_list", workspace_list);
  registry.add("workspace_info", workspace_info);
}

}  // namespace kiln::server
