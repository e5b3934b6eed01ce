// publish, publish_list, publish_share, unpublish: thin handlers over artifacts::ArtifactStore,
// plus the traced publish and URL building that `kiln publish` uses too. Passwords go into the
// store and nowhere else: not into results, summaries, traces or logs.
#include "tools/publish.h"

#include <fmt/format.h>

#include "mcp/principal.h"
#include "runs/run_tracing.h"
#include "sandbox/egress/egress_policy.h"
#include "workspace/kiln_config.h"
#include "serve/daemon.h"
#include "mcp/session_state.h"
#include "mcp/tool_registry.h"
#include "tools/apps.h"
#include "tools/sandbox_common.h"
#include "tools/traces.h"
#include "workspace/root.h"

namespace kiln::server {

using nlohmann::json;
namespace art = kiln::artifacts;

std::string artifact_url(const std::string& base, const std::string& name, std::optional<int> version) {
  return version ? fmt::format("{}/a/{}/v/{}/", base, name, *version) : fmt::format("{}/a/{}/", base, name);
}

std::string invite_url(const std::string& base, const std::string& name, const std::string& token) {
  return fmt::format("{}/a/{}/?invite={}", base, name, token);  // base64url: nothing to escape
}

json invite_links(const std::vector<art::InviteInfo>& invites, const std::string& name, const std::string& base) {
  json out = json::array();
  for (const auto& i : invites) {
    out.push_back({{"name", i.name},
                   {"url", invite_url(base, name, i.token)},
                   {"expires_at", i.expires_at ? json(*i.expires_at) : json(nullptr)}});
  }
  return out;
}

static json invite_states(const std::vector<art::InviteInfo>& invites) {
  json out = json::array();
  for (const auto& i : invites) {
    out.push_back({{"name", i.name},
                   {"created_at", i.created_at},
                   {"expires_at", i.expires_at ? json(*i.expires_at) : json(nullptr)},
                   {"revoked", i.revoked},
                   {"expired", i.expired}});
  }
  return out;
}

json artifact_json(const art::ArtifactInfo& a, const std::string& base) {
  json versions = json::array();
  for (const auto& v : a.versions) {
    versions.push_back({{"number", v.number},
                        {"url", artifact_url(base, a.name, v.number)},
                        {"created_at", v.created_at},
                        {"source_path", v.source_path},
                        {"single_file", v.single_file},
                        {"files", v.files},
                        {"bytes", v.bytes},
                        {"trace_id", v.trace_id}});
  }
  return {{"name", a.name},
          {"share", art::to_string(a.share)},
          {"url", artifact_url(base, a.name)},
          {"has_password", a.has_password},
          {"latest", a.latest()},
          {"created_at", a.created_at},
          {"expires_at", a.expires_at ? json(*a.expires_at) : json(nullptr)},
          {"expired", a.expired},
          {"versions", std::move(versions)},
          {"invites", invite_states(a.invites)}};
}

ServeBase serve_base(const std::string& state_dir, bool start) {
  if (start) {
    auto url = ensure_serve_running(state_dir);
    if (url) return {*url, ""};
    return {"", url.error().message};
  }
  if (auto info = read_serve_info(state_dir); info && serve_answers(info->url, state_dir, 500)) return {info->url, ""};
  return {"", "no kiln serve is running for this state directory; publish (or `kiln serve`) starts one"};
}

namespace {

// An artifact is the principal's who published its first version (that publish's trace says
// who); one from before principals were recorded is the local user's.
bool artifact_owned_by(traces::TraceStore& traces, const art::ArtifactInfo& a, const std::string& principal) {
  if (a.versions.empty() || a.versions.front().trace_id.empty()) return principal == local_principal();
  auto rec = traces.get(a.versions.front().trace_id);
  if (!rec || !*rec) return principal == local_principal();
  return trace_visible_to(**rec, principal);
}

}  // namespace

Result<TracedPublish> publish_traced(traces::TraceStore& traces, art::ArtifactStore& store, art::PublishRequest req,
                                     const json& client, const std::string& principal) {
  if (!req.root) return fail(Errc::internal, "publish without a workspace");
  std::string name = req.name;
  if (name.empty()) {
    auto rel = req.root->relative(req.path);
    name = art::default_artifact_name(rel ? *rel : req.path, req.root->path());
  }
  // A new version of someone else's artifact would replace what their link serves.
  if (auto existing = store.get(name); existing && *existing && !artifact_owned_by(traces, **existing, principal)) {
    return fail(Errc::conflict, fmt::format("the name {} is taken by another principal's artifact: publish under "
                                            "another name",
                                            name));
  }
  traces::TraceStart ts;
  ts.kind = "publish";
  ts.workspace_id = req.workspace_id;
  ts.client = client;
  ts.principal = principal;
  ts.command = fmt::format("publish {} as {}", req.path, name);
  ts.cwd = req.root->path();
  ts.policy = {{"share", req.share ? json(art::to_string(*req.share)) : json(nullptr)},
               {"invites", req.invite_names},
               {"expires_in_s", req.expires_in_s ? json(*req.expires_in_s) : json(nullptr)}};
  auto rec = traces.start(ts);
  if (!rec) return std::unexpected(rec.error());
  req.trace_id = rec->id;
  auto r = store.publish(req);
  traces::TraceFinish fin;
  if (r) {
    fin.status = "pass";
    fin.result = {{"artifact", r->artifact.name},
                  {"version", r->version.number},
                  {"files", r->version.files},
                  {"bytes", r->version.bytes},
                  {"new_blobs", r->new_blobs},
                  {"skipped_symlinks", r->skipped_symlinks},
                  {"share", art::to_string(r->artifact.share)},
                  {"invites", [&] {
                     json names = json::array();
                     for (const auto& i : r->new_invites) names.push_back(i.name);  // never the tokens
                     return names;
                   }()}};
  } else {
    fin.status = "error";
    fin.error = r.error().message;
    fin.result = {{"artifact", name}};
  }
  (void)traces.finish(rec->id, fin);  // the publish itself stands even if its record cannot end
  if (!r) return fail(r.error().code, fmt::format("{} (trace {})", r.error().message, rec->id));
  return TracedPublish{std::move(*r), rec->id};
}

Result<void> apply_publish_defaults(art::ArtifactStore& store, art::PublishRequest& req) {
  if (!req.root) return fail(Errc::internal, "publish without a workspace");
  if (!req.path.empty() && !req.name.empty() && req.share) return {};
  LoadedConfig cfg = load_config(*req.root);
  if (!cfg.error.empty()) {
    return fail(Errc::invalid_argument,
                cfg.error + "; fix kiln.json (its \"publish\" section gives this publish's defaults), or pass path, "
                            "name and share explicitly");
  }
  PublishConfig defaults = cfg.typed ? cfg.typed->publish : PublishConfig{};
  if (req.path.empty()) {
    if (defaults.path.empty())
      return fail(Errc::invalid_argument, "no path to publish: pass one, or set \"publish\": {\"path\": \"dist\"} in kiln.json");
    req.path = defaults.path;
  } else if (!defaults.path.empty()) {
    // The name and share of kiln.json belong to its path: publishing some other folder must not
    // land in that artifact (or behind its password).
    auto mine = req.root->relative(req.path), theirs = req.root->relative(defaults.path);
    if (!mine || !theirs || *mine != *theirs) defaults = PublishConfig{};
  }
  if (req.name.empty()) {
    if (!defaults.name.empty()) {
      req.name = defaults.name;
    } else {
      auto rel = req.root->relative(req.path);
      req.name = art::default_artifact_name(rel ? *rel : req.path, req.root->path());
    }
  }
  if (!req.share && !defaults.share.empty()) {
    auto existing = store.get(req.name);
    if (!existing) return std::unexpected(existing.error());
    if (!*existing) req.share = art::parse_share(defaults.share);
  }
  return {};
}

json publish_result_json(const TracedPublish& p, const ServeBase& base) {
  const auto& a = p.result.artifact;
  json out = {{"artifact", a.name},
              {"version", p.result.version.number},
              {"url", artifact_url(base.url, a.name)},
              {"version_url", artifact_url(base.url, a.name, p.result.version.number)},
              {"share", art::to_string(a.share)},
              {"invites", invite_links(p.result.new_invites, a.name, base.url)},
              {"files", p.result.version.files},
              {"bytes", p.result.version.bytes},
              {"new_blobs", p.result.new_blobs},
              {"skipped_symlinks", p.result.skipped_symlinks},
              {"expires_at", a.expires_at ? json(*a.expires_at) : json(nullptr)},
              {"trace_id", p.trace_id},
              {"trace_uri", trace_uri(p.trace_id)}};
  if (!base.error.empty()) out["serve_error"] = base.error;
  return out;
}

namespace {

std::vector<std::string> strings(const json& args, const char* key) {
  std::vector<std::string> out;
  if (args.contains(key))
    for (const auto& v : args[key]) out.push_back(v.get<std::string>());
  return out;
}

std::optional<art::Share> share_arg(const json& args) {
  if (!args.contains("share")) return std::nullopt;
  return art::parse_share(args["share"].get<std::string>());
}

Result<ToolOutput> publish(CallContext& ctx, RunTracer& tracer, art::ArtifactStore& store, const json& args,
                           const std::string& network_allow_file) {
  auto ws = ctx.session->workspace_for(args);
  if (!ws) return std::unexpected(ws.error());
  art::PublishRequest req;
  req.workspace_id = (*ws)->id;
  req.root = (*ws)->root.get();
  args.at("path").get_to(req.path);
  req.name = args.value("name", "");  // optional, no default: kiln.json's publish.name, else derived
  req.share = share_arg(args);
  req.password = args.value("password", "");
  req.invite_names = strings(args, "invite");
  if (args.contains("expires_in_s")) req.expires_in_s = args["expires_in_s"].get<std::int64_t>();
  if (args.contains("invite_expires_in_s")) req.invite_expires_in_s = args["invite_expires_in_s"].get<std::int64_t>();
  if (auto d = apply_publish_defaults(store, req); !d) return std::unexpected(d.error());
  if (args.value("app", false)) {
    if (auto a = apply_app_config(req); !a) return std::unexpected(a.error());
    if (!network_allow_file.empty()) {
      // Unreadable now (it was checked at start-up): the app may reach nothing, as a sandbox would.
      auto ceiling = egress::load_policy_file(network_allow_file);
      (*req.app)["app"]["network_ceiling"] = ceiling ? ceiling->to_json() : egress::Policy{}.to_json();
    }
  }
  auto p = publish_traced(tracer.store(), store, std::move(req), client_json(ctx), ctx.session->principal());
  if (!p) return std::unexpected(p.error());
  tracer.changed(p->trace_id);
  ServeBase base = serve_base(store.dir(), true);
  json out = publish_result_json(*p, base);
  // The version exists whatever the deploy says: its state and error are data in the result.
  if (auto app = app_after_publish(store.dir(), p->result); !app.is_null()) out["app"] = std::move(app);
  return ToolOutput{std::move(out)};
}

Result<ToolOutput> publish_list(CallContext& ctx, art::ArtifactStore& store, const json& args) {
  auto ws = ctx.session->workspace_for(args);
  if (!ws) return std::unexpected(ws.error());
  auto list = store.list((*ws)->id);
  if (!list) return std::unexpected(list.error());
  ServeBase base = serve_base(store.dir(), false);  // a listing starts nothing
  auto states = app_states(store.dir(), *list);
  json arts = json::array();
  for (const auto& a : *list) {
    json j = artifact_json(a, base.url);
    if (auto it = states.find(a.name); it != states.end()) j["app"] = it->second;
    arts.push_back(std::move(j));
  }
  json out = {{"workspace", (*ws)->id}, {"base_url", base.url}, {"artifacts", std::move(arts)}};
  if (!base.error.empty() && !list->empty()) out["serve_error"] = base.error;
  return ToolOutput{std::move(out)};
}

}  // namespace

Result<art::ArtifactInfo> owned_by_session_workspace(CallContext& ctx, RunTracer& tracer, art::ArtifactStore& store,
                                                     const json& args, const std::string& name) {
  auto ws = ctx.session->workspace_for(args);
  if (!ws) return std::unexpected(ws.error());
  auto a = store.get(name);
  if (!a) return std::unexpected(a.error());
  if (!*a || !artifact_owned_by(tracer.store(), **a, ctx.session->principal()))
    return fail(Errc::not_found, fmt::format("no artifact named {} (publish_list shows this workspace's)", name));
  if ((*a)->workspace_id != (*ws)->id) {
    return fail(Errc::conflict,
                fmt::format("artifact {} was published from another workspace, not from {}: open that workspace "
                            "(workspace_open) to change it, or use `kiln artifacts` on the command line",
                            name, (*ws)->name));
  }
  return std::move(**a);
}

namespace {

Result<ToolOutput> publish_share(CallContext& ctx, RunTracer& tracer, art::ArtifactStore& store, const json& args) {
  art::ShareRequest req;
  args.at("artifact").get_to(req.name);
  req.share = share_arg(args);
  req.password = args.value("password", "");
  req.invite_names = strings(args, "invite");
  req.revoke = strings(args, "revoke");
  if (args.contains("expires_in_s")) req.expires_in_s = args["expires_in_s"].get<std::int64_t>();
  if (args.contains("invite_expires_in_s")) req.invite_expires_in_s = args["invite_expires_in_s"].get<std::int64_t>();
  if (auto own = owned_by_session_workspace(ctx, tracer, store, args, req.name); !own) return std::unexpected(own.error());
  auto r = store.share(req);
  if (!r) return std::unexpected(r.error());
  // New links must work when handed out; otherwise there is nothing to start a server for.
  ServeBase base = serve_base(store.dir(), !r->new_invites.empty());
  const auto& a = r->artifact;
  json out = {{"artifact", a.name},
              {"share", art::to_string(a.share)},
              {"url", artifact_url(base.url, a.name)},
              {"has_password", a.has_password},
              {"expires_at", a.expires_at ? json(*a.expires_at) : json(nullptr)},
              {"invites", invite_links(r->new_invites, a.name, base.url)},
              {"all_invites", invite_states(a.invites)}};
  if (!base.error.empty()) out["serve_error"] = base.error;
  return ToolOutput{std::move(out)};
}

Result<ToolOutput> unpublish(CallContext& ctx, RunTracer& tracer, art::ArtifactStore& store, const json& args) {
  const std::string name = args.at("artifact");
  if (auto own = owned_by_session_workspace(ctx, tracer, store, args, name); !own) return std::unexpected(own.error());
  std::optional<int> version;
  if (args.contains("version")) version = args["version"].get<int>();
  auto r = unpublish_artifact(store, name, version, args.value("delete_data", false));
  if (!r) return std::unexpected(r.error());
  return ToolOutput{std::move(*r)};
}

}  // namespace

void register_publish_tools(ToolRegistry& registry, RunTracer& tracer, art::ArtifactStore& store,
                            std::string network_allow_file) {
  registry.add("publish", [&tracer, &store, file = std::move(network_allow_file)](CallContext& ctx, const json& args) {
    return publish(ctx, tracer, store, args, file);
  });
  registry.add("publish_list", [&store](CallContext& ctx, const json& args) { return publish_list(ctx, store, args); });
  registry.add("publish_share",
               [&tracer, &store](CallContext& ctx, const json& args) { return publish_share(ctx, tracer, store, args); });
  registry.add("unpublish",
               [&tracer, &store](CallContext& ctx, const json& args) { return unpublish(ctx, tracer, store, args); });
}

}  // namespace kiln::server
