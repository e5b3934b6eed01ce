// Opening a folder as a workspace: shared by the workspace_open tool, client roots and
// `kiln mcp --workspace`.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "server/kiln_config.h"
#include "server/session_state.h"
#include "workspace/state_store.h"

namespace kiln::server {

struct OpenedWorkspace {
  workspace::WorkspaceRecord record;
  bool is_new = false;
  std::shared_ptr<const OpenWorkspace> workspace;
};

// `path` must be absolute (a leading "~/" means $HOME). With `create`, a missing folder is made.
// Makes the workspace current for the session.
Result<OpenedWorkspace> open_workspace_folder(SessionState& state, const std::string& path,
                                              const std::string& name, bool create);

// kiln.json of the workspace root, parsed and checked against schemas/kiln.schema.json; defaults
// when absent. A broken or invalid file is reported in `error` (and `config` holds the defaults)
// rather than failing the caller, so the workspace still opens.
struct LoadedConfig {
  nlohmann::json config = nlohmann::json::object();  // the document as written, when valid
  std::string source;  // "kiln.json" or "defaults"
  std::string error;
  std::optional<KilnConfig> typed;  // set exactly when source is "kiln.json"
};
LoadedConfig load_config(const workspace::Root& root);

}  // namespace kiln::server
