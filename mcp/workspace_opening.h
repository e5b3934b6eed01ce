// Opening a folder as a workspace: shared by the workspace_open tool, client roots and
// `kiln mcp --workspace`.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "mcp/session_state.h"
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

}  // namespace kiln::server
