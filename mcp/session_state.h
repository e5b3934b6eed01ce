// Per-session state a tool handler may consult: who the client is and which workspace is current.
// Shared by every transport (stdio now, Streamable HTTP later).
#pragma once

#include <memory>
#include <condition_variable>
#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "workspace/root.h"

namespace kiln::workspace { class StateStore; }

namespace kiln::server {

struct OpenWorkspace {
  std::string id;
  std::string name;
  std::shared_ptr<const workspace::Root> root;  // holds the folder open for the whole session
};

struct ClientInfo {
  std::string name;
  std::string version;
};

class SessionState {
 public:
  SessionState(workspace::StateStore& store, std::string principal) : store_(store), principal_(std::move(principal)) {}

  // The state of modern (2026-07-28) requests, which carry no session: nothing a request does
  // selects a workspace for the next one. `fallback` (the server's --workspace, or null) is what
  // a tool gets that names none.
  static std::shared_ptr<SessionState> stateless(workspace::StateStore& store, std::string principal);
  void set_fallback(std::shared_ptr<const OpenWorkspace> fallback);
  bool is_stateless() const { return stateless_; }

  workspace::StateStore& store() { return store_; }
  // Whom this session acts for: its sandboxes, runs and traces are this principal's, and it sees
  // no other principal's.
  const std::string& principal() const { return principal_; }

  // The workspace a workspace-scoped tool works on: arguments["workspace"] (an id or a name)
  // when given, else the session's current one. None open and none given: a tool error telling
  // the caller to call workspace_open.
  Result<std::shared_ptr<const OpenWorkspace>> workspace_for(const nlohmann::json& arguments);

  // The workspace whose root holds `absolute_path` (a file:// resource): the current one, else
  // the known workspace with the deepest root above it. Not found: an error naming the path.
  Result<std::shared_ptr<const OpenWorkspace>> workspace_containing(const std::string& absolute_path);

  // Opens `root_path` as a workspace of this session (recording it in the state store) and makes
  // it current (not for a stateless state: the caller passes the id on).
  Result<std::shared_ptr<const OpenWorkspace>> open_and_select(const std::string& id,
                                                               const std::string& name,
                                                               const std::string& root_path);
  std::shared_ptr<const OpenWorkspace> current() const;

  // While the client is being asked for its roots, workspace_for waits (briefly) for the answer
  // instead of failing a tool call that raced the start-up.
  void begin_pending_selection();
  void end_pending_selection();

  void set_client(ClientInfo info);
  ClientInfo client() const;

 private:
  workspace::StateStore& store_;
  const std::string principal_;
  bool stateless_ = false;
  mutable std::mutex mu_;
  std::condition_variable selection_cv_;
  int pending_selections_ = 0;
  std::shared_ptr<const OpenWorkspace> current_;
  ClientInfo client_;
};

}  // namespace kiln::server
