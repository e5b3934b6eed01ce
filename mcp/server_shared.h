// What every session of a server process shares at run time, whichever era it speaks: the tasks
// that outlive their requests, and the resource-change events that reach subscribers in other
// sessions (a modern HTTP request is a session of its own, so its edits must reach a listener
// that another request opened).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "mcp/tasks.h"

namespace kiln::server {

class ResourceEvents {
 public:
  using Listener = std::function<void(const std::string& principal, const std::string& uri)>;
  int subscribe(Listener listener);
  void unsubscribe(int token);
  // Tells every listener that `uri` changed by an act of `principal`.
  void publish(const std::string& principal, const std::string& uri);

 private:
  std::mutex mu_;
  int next_ = 1;
  std::map<int, std::shared_ptr<Listener>> listeners_;
};

// The same, for tasks: every change of a task reaches the sessions, whose listeners with that
// task id (subscriptions/listen notifications.taskIds) send notifications/tasks.
class TaskEvents {
 public:
  using Listener = std::function<void(const std::string& principal, const TaskSnapshot& task)>;
  int subscribe(Listener listener);
  void unsubscribe(int token);
  void publish(const std::string& principal, const TaskSnapshot& task);

 private:
  std::mutex mu_;
  int next_ = 1;
  std::map<int, std::shared_ptr<Listener>> listeners_;
};

struct OpenWorkspace;

struct ServerShared {
  ServerShared() {
    tasks.set_observer([this](const std::string& p, const TaskSnapshot& t) { task_events.publish(p, t); });
  }
  ServerShared(const ServerShared&) = delete;
  ServerShared& operator=(const ServerShared&) = delete;
  // Declared first, so they outlive the registry, whose destructor still reports tasks ending.
  ResourceEvents events;
  TaskEvents task_events;
  TaskRegistry tasks;
  // The server's --workspace as modern requests see it, opened once for all of them.
  std::mutex fallback_mu;
  bool fallback_opened = false;
  std::shared_ptr<const OpenWorkspace> fallback;
};

std::shared_ptr<ServerShared> make_server_shared();

}  // namespace kiln::server
