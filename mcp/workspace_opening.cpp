// Opening folders as workspaces: the session's roots and --workspace, and the workspace_open tool.
#include "mcp/workspace_opening.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fmt/format.h>

#include "core/fd_io.h"
#include "core/path_nesting.h"
#include "workspace/path_links.h"

namespace kiln::server {

namespace {

std::string expand_home(const std::string& path) {
  if (path == "~" || path.starts_with("~/")) {
    const char* home = std::getenv("HOME");
    if (home && *home) return std::string(home) + path.substr(1);
  }
  return path;
}

}  // namespace

Result<OpenedWorkspace> open_workspace_folder(SessionState& state, const std::string& given_path,
                                              const std::string& name, bool create) {
  std::string path = expand_home(given_path);
  if (path.empty() || path.front() != '/') {
    return fail(Errc::invalid_argument,
                fmt::format("workspace path '{}' is not absolute; pass the folder's absolute path", given_path));
  }
  std::error_code ec;
  auto status = std::filesystem::status(path, ec);
  if (!std::filesystem::exists(status)) {
    if (!create) {
      return fail(Errc::not_found,
                  fmt::format("folder {} does not exist; pass create: true to make it", path));
    }
    // Nothing is made inside the state directory: judged by the nearest folder that exists.
    std::filesystem::path existing = std::filesystem::path(path).lexically_normal();
    while (existing.has_parent_path() && existing != existing.parent_path() && !std::filesystem::exists(existing, ec))
      existing = existing.parent_path();
    // A named workspace is made in <state>/workspaces/ on purpose (checked again once it exists).
    const std::string managed = state.store().dir() + "/workspaces/";
    const bool named = std::filesystem::path(path).lexically_normal().string().starts_with(managed);
    if (auto n = nesting_of(existing.string(), state.store().dir());
        !named && n && (*n == Nesting::same || *n == Nesting::inside)) {
      return fail(Errc::invalid_argument,
                  fmt::format("refusing to create workspace {}: it would lie inside Kiln's state directory {} (tokens, "
                              "secrets, every principal's traces); pick a folder outside it",
                              path, state.store().dir()));
    }
    std::filesystem::create_directories(path, ec);
    if (ec) return fail(Errc::io, fmt::format("cannot create folder {}: {}", path, ec.message()));
  } else if (!std::filesystem::is_directory(status)) {
    return fail(Errc::invalid_argument, fmt::format("{} is not a folder; a workspace is a folder", path));
  }
  auto resolved = workspace::resolve_workspace_path(path);
  if (!resolved) return std::unexpected(resolved.error());
  std::string canonical = std::move(*resolved);

  // Before the folder is registered: a workspace that is, holds or sits in the state directory
  // would hand file tools the token, the secrets and other principals' traces.
  if (auto apart = check_apart_from_state_dir(canonical, state.store().dir()); !apart) return std::unexpected(apart.error());

  OpenedWorkspace out;
  auto rec = state.store().open_workspace(canonical, name, &out.is_new);
  if (!rec) return std::unexpected(rec.error());
  out.record = std::move(*rec);
  auto ws = state.open_and_select(out.record.id, out.record.name, out.record.root);
  if (!ws) return std::unexpected(ws.error());
  out.workspace = std::move(*ws);
  return out;
}

}  // namespace kiln::server
