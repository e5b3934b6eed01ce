// `kiln run` and `kiln verify` act on a folder of this machine the way an agent's session does:
// the folder becomes a workspace record and what runs in it is traced, under the same rules.
#pragma once

#include <memory>
#include <string>

#include "core/error.h"
#include "traces/trace_store.h"
#include "workspace/root.h"
#include "workspace/state_store.h"

namespace kiln::cli {

// Declared before a sandbox manager, the stores outlive its last clean-up callback.
struct LocalWorkspace {
  workspace::Root root;
  std::unique_ptr<workspace::StateStore> state;
  workspace::WorkspaceRecord record;
  std::unique_ptr<traces::TraceStore> traces;
};

// `folder` (empty: the current directory) resolved and opened, refused if it is the state
// directory, inside it or around it, then registered in the state store; the trace store opened.
Result<LocalWorkspace> open_local_workspace(const std::string& folder, const std::string& state_dir);

}  // namespace kiln::cli
