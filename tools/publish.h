// The publish tools and `kiln publish` share one path: a publish recorded as a trace, and the
// JSON that shows artifacts with their URLs (never a password; invite links only when created).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "artifacts/artifact_store.h"
#include "core/error.h"
#include "traces/trace_store.h"

namespace kiln::server {

class RunTracer;
class ToolRegistry;

struct CallContext;

// publish, publish_list, publish_share, unpublish (tools/publish.cpp).
// `network_allow_file`: the session's --network-allow ceiling ("" none); an app it publishes keeps
// that ceiling with its version, so the app cannot reach further than the session could.
void register_publish_tools(ToolRegistry& registry, RunTracer& tracer, artifacts::ArtifactStore& store,
                            std::string network_allow_file = {});

// base + "/a/NAME/" or "/a/NAME/v/N/"; with an empty base, the path alone.
std::string artifact_url(const std::string& base, const std::string& name, std::optional<int> version = std::nullopt);
std::string invite_url(const std::string& base, const std::string& name, const std::string& token);
nlohmann::json artifact_json(const artifacts::ArtifactInfo& a, const std::string& base);
nlohmann::json invite_links(const std::vector<artifacts::InviteInfo>& invites, const std::string& name,
                            const std::string& base);

// The base URL of the state directory's `kiln serve`: started if none answers (start = true), or
// only looked up. `error` says why there is none; URLs then fall back to bare paths.
struct ServeBase {
  std::string url;
  std::string error;
};
ServeBase serve_base(const std::string& state_dir, bool start);

struct TracedPublish {
  artifacts::PublishResult result;
  std::string trace_id;
};

// Publishes `req` (its trace_id is set here) under a trace of kind "publish": command
// "publish PATH as NAME", status pass or error, result {artifact, version, files, bytes,
// new_blobs, share}. The trace id comes back with the error too, in the message.
// `principal`: whom the publish is for, recorded in its trace.
Result<TracedPublish> publish_traced(traces::TraceStore& traces, artifacts::ArtifactStore& store,
                                     artifacts::PublishRequest req, const nlohmann::json& client,
                                     const std::string& principal);

// Fills what the call left out from kiln.json's "publish" section: the path (`kiln publish` with
// no PATH; the tool requires one), the name, and the share mode of a new artifact (a later
// publish keeps the mode publish_share gave it); name and share only for kiln.json's own path
// (when it names one). A broken kiln.json is an error when something
// was left to it: publishing "password" content publicly because its file had a typo is worse.
Result<void> apply_publish_defaults(artifacts::ArtifactStore& store, artifacts::PublishRequest& req);

// The artifact `name` as a tool that changes it may see it. Artifact names are global to the state
// directory: an agent may only change artifacts published from the workspace it works in (the
// user's `kiln artifacts` on the command line can change any). Another principal's artifact is
// answered as a missing one.
Result<artifacts::ArtifactInfo> owned_by_session_workspace(CallContext& ctx, RunTracer& tracer,
                                                           artifacts::ArtifactStore& store,
                                                           const nlohmann::json& args, const std::string& name);

// The publish tool's structured result.
nlohmann::json publish_result_json(const TracedPublish& p, const ServeBase& base);

}  // namespace kiln::server
