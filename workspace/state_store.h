// Kiln's durable record of workspaces (and, in later layers, traces and artifacts): SQLite in WAL
// mode inside the state directory, safe for several kiln processes sharing one directory.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "db/database.h"

namespace kiln::workspace {

struct WorkspaceRecord {
  std::string id;
  std::string name;
  std::string root;            // canonical absolute path
  std::string created_at;      // ISO 8601 UTC
  std::string last_opened_at;  // ISO 8601 UTC
};

// The state directory: $KILN_HOME, else $XDG_STATE_HOME/kiln, else ~/.local/state/kiln.
std::string default_state_dir();

// Current time as ISO 8601 UTC with milliseconds ("2026-11-30T20:15:02.123Z").
std::string now_iso8601();

class StateStore {
 public:
  // Creates the directory (0700) and the database if missing, and migrates the schema.
  static Result<std::unique_ptr<StateStore>> open(const std::string& state_dir);
  // open() in two steps, for a server that answers before its stores are open (`kiln mcp`): the
  // object exists at once, open_database() does what open() does; nothing else may be called
  // before it succeeded.
  static std::unique_ptr<StateStore> unopened(const std::string& state_dir);
  Result<void> open_database();
  StateStore(const StateStore&) = delete;
  StateStore& operator=(const StateStore&) = delete;

  const std::string& dir() const { return dir_; }

  // Finds the record of `root` or creates it (name defaults to the folder's basename, made unique
  // with a numeric suffix). `created` tells which happened. Marks it opened now.
  Result<WorkspaceRecord> open_workspace(const std::string& root, const std::string& wanted_name,
                                         bool* created);
  Result<std::optional<WorkspaceRecord>> find_workspace(const std::string& id_or_name);
  Result<std::vector<WorkspaceRecord>> list_workspaces();

 private:
  explicit StateStore(std::string dir) : dir_(std::move(dir)) {}

  std::string dir_;
  db::Database db_;
  std::mutex mu_;  // one connection, one statement at a time
};

}  // namespace kiln::workspace
