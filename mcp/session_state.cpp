// Workspace selection for a session: the current workspace, or the one a tool call names.
#include "mcp/session_state.h"

#include <chrono>
#include <fmt/format.h>

#include "core/path_nesting.h"

#include "workspace/state_store.h"

namespace kiln::server {

Result<std::shared_ptr<const OpenWorkspace>> SessionState::open_and_select(const std::string& id,
                                                                           const std::string& name,
                                                                           const std::string& root_path) {
  if (auto apart = check_apart_from_state_dir(root_path, store_.dir()); !apart) return std::unexpected(apart.error());
  auto root = workspace::Root::open_resolved(root_path);
  if (!root) return std::unexpected(root.error());
  auto ws = std::make_shared<OpenWorkspace>();
  ws->id = id;
  ws->name = name;
  ws->root = std::make_shared<const workspace::Root>(std::move(*root));
  std::lock_guard lock(mu_);
  if (!stateless_) current_ = ws;
  return std::shared_ptr<const OpenWorkspace>(ws);
}

std::shared_ptr<SessionState> SessionState::stateless(workspace::StateStore& store, std::string principal) {
  auto s = std::make_shared<SessionState>(store, std::move(principal));
  s->stateless_ = true;
  return s;
}

void SessionState::set_fallback(std::shared_ptr<const OpenWorkspace> fallback) {
  std::lock_guard lock(mu_);
  current_ = std::move(fallback);
}

Result<std::shared_ptr<const OpenWorkspace>> SessionState::workspace_containing(const std::string& absolute_path) {
  auto inside = [&](const std::string& root) {
    return absolute_path == root || (absolute_path.starts_with(root) && absolute_path[root.size()] == '/') || root == "/";
  };
  if (auto cur = current(); cur && inside(cur->root->path())) return cur;
  auto list = store_.list_workspaces();
  if (!list) return std::unexpected(list.error());
  const workspace::WorkspaceRecord* best = nullptr;
  for (const auto& w : *list) {
    if (inside(w.root) && (!best || w.root.size() > best->root.size())) best = &w;
  }
  if (!best) {
    return fail(Errc::not_found, fmt::format("{} is in no known workspace: call workspace_open with its folder first",
                                             absolute_path));
  }
  return workspace_for(nlohmann::json{{"workspace", best->id}});
}

Result<std::shared_ptr<const OpenWorkspace>> SessionState::workspace_for(const nlohmann::json& arguments) {
  std::string wanted;
  if (arguments.is_object() && arguments.contains("workspace") && arguments["workspace"].is_string())
    wanted = arguments["workspace"].get<std::string>();
  std::shared_ptr<const OpenWorkspace> cur;
  {
    std::unique_lock lock(mu_);
    selection_cv_.wait_for(lock, std::chrono::seconds(5), [this] { return pending_selections_ == 0; });
    cur = current_;
  }
  if (wanted.empty()) {
    if (cur) return cur;
    if (stateless_) {
      return fail(Errc::invalid_argument,
                  "no workspace given: requests of MCP 2026-07-28 carry no session, so there is no current "
                  "workspace; pass \"workspace\" (the id workspace_open returned, or a name from workspace_list), "
                  "or start the server with --workspace PATH");
    }
    return fail(Errc::invalid_argument,
                "no workspace is open: call workspace_open with the folder's absolute path first "
                "(or pass \"workspace\" with a known workspace id or name)");
  }
  if (cur && (cur->id == wanted || cur->name == wanted)) return cur;
  auto rec = store_.find_workspace(wanted);
  if (!rec) return std::unexpected(rec.error());
  if (!*rec) {
    return fail(Errc::not_found, fmt::format("unknown workspace '{}': call workspace_list to see the known ones, "
                                             "or workspace_open to add a folder", wanted));
  }
  // Naming another workspace does not change the current one. A record an older Kiln made for a
  // folder in the state directory is refused here, each time it is named.
  if (auto apart = check_apart_from_state_dir((*rec)->root, store_.dir()); !apart) return std::unexpected(apart.error());
  auto root = workspace::Root::open_resolved((*rec)->root);
  if (!root) return std::unexpected(root.error());
  auto ws = std::make_shared<OpenWorkspace>();
  ws->id = (*rec)->id;
  ws->name = (*rec)->name;
  ws->root = std::make_shared<const workspace::Root>(std::move(*root));
  return std::shared_ptr<const OpenWorkspace>(ws);
}

std::shared_ptr<const OpenWorkspace> SessionState::current() const {
  std::lock_guard lock(mu_);
  return current_;
}

void SessionState::begin_pending_selection() {
  std::lock_guard lock(mu_);
  ++pending_selections_;
}

void SessionState::end_pending_selection() {
  {
    std::lock_guard lock(mu_);
    if (pending_selections_ > 0) --pending_selections_;
  }
  selection_cv_.notify_all();
}

void SessionState::set_client(ClientInfo info) {
  std::lock_guard lock(mu_);
  client_ = std::move(info);
}

ClientInfo SessionState::client() const {
  std::lock_guard lock(mu_);
  return client_;
}

}  // namespace kiln::server
