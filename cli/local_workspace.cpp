// The folder-to-workspace steps of cli/local_workspace.h, in the order that registers nothing
// for a folder that is refused.
#include "cli/local_workspace.h"

#include <filesystem>

#include "core/path_nesting.h"
#include "workspace/path_links.h"

namespace kiln::cli {

Result<LocalWorkspace> open_local_workspace(const std::string& folder, const std::string& state_dir) {
  std::error_code ec;
  auto resolved = workspace::resolve_workspace_path(folder.empty() ? std::filesystem::current_path(ec).string() : folder);
  if (!resolved) return std::unexpected(resolved.error());
  auto root = workspace::Root::open_resolved(*resolved);
  if (!root) return std::unexpected(root.error());
  // Before the folder is registered or anything runs: never the state directory, in it or around it.
  if (auto apart = check_apart_from_state_dir(root->path(), state_dir); !apart) return std::unexpected(apart.error());
  auto state = workspace::StateStore::open(state_dir);
  if (!state) return std::unexpected(state.error());
  bool created = false;
  auto record = (*state)->open_workspace(root->path(), "", &created);
  if (!record) return std::unexpected(record.error());
  auto traces = traces::TraceStore::open(state_dir);
  if (!traces) return std::unexpected(traces.error());
  return LocalWorkspace{std::move(*root), std::move(*state), std::move(*record), std::move(*traces)};
}

}  // namespace kiln::cli
