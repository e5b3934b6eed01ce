// What publish, unpublish, the listings and `kiln publish --app` / `kiln artifacts rm` share about
// apps: kiln.json's app section turned into what a version stores, and the calls to kiln serve's
// supervisor (deploy, stop, list) whose failures become data in a result rather than errors.
#pragma once

#include <map>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "artifacts/artifact_store.h"
#include "core/error.h"

namespace kiln::server {

// One call to the state directory's kiln serve control API with the state directory's own
// bearer token (mcp/http/token.h); see serve/control_client.h for the errors.
Result<nlohmann::json> app_control(const std::string& state_dir, const nlohmann::json& request, int timeout_ms);

// Sets req.app from the workspace's kiln.json: {"app": its app section, "services": the services
// it names}. An unreadable kiln.json or one without "app" is an invalid_argument that says what to add.
Result<void> apply_app_config(artifacts::PublishRequest& req);

// Starts (or restarts onto its latest version) the app `name` and returns its status; when kiln
// serve cannot be reached the answer is {"state": "unknown", "error": ...}, never an error: the
// version is published either way. `app` is the stored app JSON (it sets how long to wait).
nlohmann::json deploy_app(const std::string& state_dir, const std::string& name, const nlohmann::json& app);

// What a new version means for the app: an app version is deployed (deploy_app's answer); a
// static version on top of an app stops it, keeping its data ({"state": "stopped", ...}); null
// when neither the new nor the previous version is an app.
nlohmann::json app_after_publish(const std::string& state_dir, const artifacts::PublishResult& published);

// The status of every app artifact among `artifacts`, by name, from one "list" call (none when
// no artifact is an app); {"state": "unknown", "error": ...} for each when kiln serve cannot answer.
std::map<std::string, nlohmann::json> app_states(const std::string& state_dir,
                                                 const std::vector<artifacts::ArtifactInfo>& artifacts);

// Unpublish with the app rules of TOOLS.md: an app is stopped before its files go (its data kept
// unless delete_data, which only a whole-artifact removal may ask for), and when one version of
// an app goes and an app version is left, the app is deployed onto it. The result:
// {artifact, removed, artifact_removed, app?: {stopped, data_deleted, data_kept, data_dir, note,
// state?, error?}}.
Result<nlohmann::json> unpublish_artifact(artifacts::ArtifactStore& store, const std::string& name,
                                          std::optional<int> version, bool delete_data);

}  // namespace kiln::server
