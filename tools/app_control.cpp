// The app side of publish and unpublish: kiln.json's app section as a version stores it, and the
// supervisor calls around a publish or a removal. kiln serve owns the apps; these only ask it.
#include <algorithm>

#include <fmt/format.h>

#include "mcp/http/token.h"
#include "serve/control_client.h"
#include "tools/apps.h"
#include "workspace/kiln_config.h"
#include "workspace/root.h"

namespace kiln::server {

using nlohmann::json;
namespace art = kiln::artifacts;

namespace {

constexpr int kQuickMs = 15000;  // status, list: answered from memory
constexpr int kStopMs = 120000;  // a postgres fast shutdown and a SIGTERM grace

// How long a deploy may take: the app's start, its services' readiness, and slack for a first
// start that makes a database. Bounded so a wrong value cannot hang a tool call for hours.
int deploy_wait_ms(const json& app) {
  double s = 60;
  if (app.is_object()) {
    s += app.value("app", json::object()).value("start_timeout_s", 30.0);
    for (const auto& svc : app.value("services", json::array()))
      if (svc.is_object()) s += svc.value("ready_timeout_s", 60.0);
  }
  return int(std::min(s, 1800.0) * 1000);
}

json unknown_state(const Error& e) { return json{{"state", "unknown"}, {"error", e.message}}; }

}  // namespace

Result<json> app_control(const std::string& state_dir, const json& request, int timeout_ms) {
  auto token = ensure_default_token(state_dir);
  if (!token) return std::unexpected(token.error());
  return call_serve_control(state_dir, *token, request, timeout_ms);
}

Result<void> apply_app_config(art::PublishRequest& req) {
  if (!req.root) return fail(Errc::internal, "publish without a workspace");
  LoadedConfig cfg = load_config(*req.root);
  if (!cfg.error.empty())
    return fail(Errc::invalid_argument, cfg.error + "; an app is described by kiln.json's \"app\" section, so fix the "
                                                    "file before publishing with app: true");
  if (!cfg.typed || !cfg.typed->app) {
    return fail(Errc::invalid_argument,
                "publishing with app: true needs an \"app\" section in the workspace's kiln.json saying how to start "
                "the server, e.g. \"app\": {\"run\": \"node server.js\"} (it must listen on $PORT); add it, or "
                "publish without app for static files");
  }
  json services = json::array();
  for (const auto& name : cfg.typed->app->services)
    for (const auto& s : cfg.typed->services)
      if (s.name == name) services.push_back(to_json(s));
  req.app = json{{"app", to_json(*cfg.typed->app)}, {"services", std::move(services)}};
  return {};
}

json deploy_app(const std::string& state_dir, const std::string& name, const json& app) {
  auto r = app_control(state_dir, {{"op", "deploy"}, {"artifact", name}}, deploy_wait_ms(app));
  if (!r) return unknown_state(r.error());
  return *r;
}

json app_after_publish(const std::string& state_dir, const art::PublishResult& published) {
  const auto& a = published.artifact;
  if (published.version.app) return deploy_app(state_dir, a.name, *published.version.app);
  const auto n = a.versions.size();
  if (n < 2 || !a.versions[n - 2].app) return nullptr;
  auto r = app_control(state_dir, {{"op", "stop"}, {"artifact", a.name}, {"delete_data", false}}, kStopMs);
  if (!r) return unknown_state(r.error());
  json out = *r;
  out["state"] = "stopped";
  out["note"] = fmt::format("version {} is static files, so app {} was stopped (its data is kept); publish with "
                            "app: true to run it again",
                            published.version.number, a.name);
  return out;
}

std::map<std::string, json> app_states(const std::string& state_dir, const std::vector<art::ArtifactInfo>& artifacts) {
  std::map<std::string, json> out;
  if (std::none_of(artifacts.begin(), artifacts.end(), [](const auto& a) { return a.is_app(); })) return out;
  auto r = app_control(state_dir, {{"op", "list"}}, kQuickMs);
  std::map<std::string, json> known;
  if (r)
    for (const auto& s : r->value("apps", json::array()))
      if (s.is_object() && s.contains("artifact") && s["artifact"].is_string()) known[s["artifact"]] = s;
  for (const auto& a : artifacts) {
    if (!a.is_app()) continue;
    if (!r) {
      out[a.name] = unknown_state(r.error());
    } else if (auto it = known.find(a.name); it != known.end()) {
      out[a.name] = it->second;
    } else {
      out[a.name] = {{"state", "unknown"},
                     {"error", fmt::format("kiln serve does not run app {} (yet); app_status {} asks it to load it",
                                           a.name, a.name)}};
    }
  }
  return out;
}

Result<json> unpublish_artifact(art::ArtifactStore& store, const std::string& name, std::optional<int> version,
                                bool delete_data) {
  if (version && delete_data) {
    return fail(Errc::invalid_argument,
                fmt::format("delete_data deletes app {}'s data, which all its versions share, so it only goes with "
                            "the whole artifact: leave out version (or delete_data to keep the data)",
                            name));
  }
  auto before = store.get(name);
  if (!before) return std::unexpected(before.error());
  if (!*before) return fail(Errc::not_found, fmt::format("no artifact {} (publish_list or `kiln artifacts list` shows them)", name));
  const art::ArtifactInfo& a = **before;
  const bool had_app = std::any_of(a.versions.begin(), a.versions.end(), [](const auto& v) { return v.app.has_value(); });
  const bool removes_running = !version || *version == a.latest();
  json app_out;
  if (had_app && removes_running) {
    // Stopped before its files go: a running app must never find its folder gone under it.
    auto stopped = app_control(store.dir(), {{"op", "stop"}, {"artifact", name}, {"delete_data", delete_data}}, kStopMs);
    if (!stopped && delete_data) {
      return fail(stopped.error().code,
                  fmt::format("nothing was removed: kiln serve could not stop app {} and delete its data: {}", name,
                              stopped.error().message));
    }
    if (stopped) {
      app_out = *stopped;
    } else {
      app_out = {{"stopped", false}, {"data_deleted", false}, {"error", stopped.error().message}};
    }
  }
  auto removed = store.unpublish(name, version);
  if (!removed) return std::unexpected(removed.error());
  json out = {{"artifact", name}, {"removed", *removed}, {"artifact_removed", !version}};
  if (!had_app) return out;
  if (app_out.is_null()) app_out = {{"stopped", false}, {"data_deleted", false}};
  const bool deleted = app_out.value("data_deleted", false);
  app_out["data_kept"] = !deleted;
  if (!app_out.contains("data_dir")) app_out["data_dir"] = nullptr;
  if (version) {
    auto after = store.get(name);
    if (after && *after && (*after)->is_app()) {
      json status = deploy_app(store.dir(), name, *(*after)->versions.back().app);
      app_out["state"] = status.value("state", "unknown");
      app_out["status"] = std::move(status);
      app_out["note"] = fmt::format("app {} runs on version {} now, with the same data", name, (*after)->latest());
    } else {
      app_out["note"] = fmt::format("no app version of {} is left, so the app stays stopped; its data is kept for "
                                    "the next publish with app: true",
                                    name);
    }
  } else if (app_out.contains("error")) {
    app_out["note"] = fmt::format("kiln serve could not be asked to stop app {} ({}); it finds the artifact gone "
                                  "and does not start it again; the data is kept in Kiln's state directory",
                                  name, app_out["error"].get<std::string>());
  } else if (deleted) {
    app_out["note"] = fmt::format("app {} is stopped and its data (databases and data folder) deleted", name);
  } else {
    app_out["note"] = fmt::format("app {} is stopped; its data (databases and data folder) is kept in Kiln's state "
                                  "directory: publishing {} again with app: true runs on it; to delete it, publish "
                                  "and unpublish with delete_data: true",
                                  name, name);
  }
  out["app"] = std::move(app_out);
  return out;
}

}  // namespace kiln::server
