// Calls that outlive the request that started them: the tasks of MCP (the 2026-07-28 extension
// io.modelcontextprotocol/tasks, and 2025-11-25's experimental tasks). The registry runs each on a
// thread of its own, keeps its outcome until its time to live has passed, and lets only the
// principal that started a task see or cancel it. Ids are 128 random bits: unguessable handles.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "mcp/method_result.h"

namespace kiln::server {

struct TaskSnapshot {
  std::string id;
  // working, completed (result holds the request's result), failed (error holds the JSON-RPC
  // error), cancelled.
  std::string status;
  std::string status_message;
  std::string created_at;  // ISO 8601, UTC, milliseconds
  std::string updated_at;
  std::int64_t ttl_ms = 0;
  std::int64_t poll_ms = 0;
  std::optional<nlohmann::json> result;
  std::optional<RpcError> error;
  bool terminal() const { return status != "working"; }
};

class TaskRegistry {
 public:
  // `status(text)` sets the task's status message (progress); the work should return soon after
  // `stop` is requested (tasks/cancel, server shutdown).
  using Work = std::function<MethodResult(std::stop_token stop, std::function<void(std::string)> status)>;

  static constexpr std::int64_t kDefaultTtlMs = 60 * 60 * 1000;      // results kept an hour
  static constexpr std::int64_t kMaxTtlMs = 24 * 60 * 60 * 1000;
  static constexpr std::int64_t kPollMs = 500;
  // Each task is a sandbox (verify, sandbox_exec): few enough that one principal's tasks leave the
  // host's sandbox budget room for others'.
  static constexpr std::size_t kMaxRunningPerPrincipal = 8;
  // Finished tasks kept per principal; beyond it the oldest finished ones go before their TTL.
  static constexpr std::size_t kMaxKeptPerPrincipal = 256;

  TaskRegistry() = default;
  ~TaskRegistry();  // cancels what still runs and waits for it
  TaskRegistry(const TaskRegistry&) = delete;
  TaskRegistry& operator=(const TaskRegistry&) = delete;

  // Starts `work` as a task of `principal`; the snapshot returned is already visible to get().
  // nullopt when the principal has kMaxRunningPerPrincipal tasks running.
  std::optional<TaskSnapshot> start(const std::string& principal, std::optional<std::int64_t> ttl_ms, Work work);
  std::optional<TaskSnapshot> get(const std::string& principal, const std::string& id);
  // Blocks until the task is terminal (or `stop`); nullopt for an unknown task.
  std::optional<TaskSnapshot> wait(const std::string& principal, const std::string& id, std::stop_token stop);
  enum class Cancel { unknown, already_terminal, requested };
  // Asks the work to stop; the task shows `cancelled` at once, whatever the work still does.
  Cancel cancel(const std::string& principal, const std::string& id, TaskSnapshot* after = nullptr);
  std::vector<TaskSnapshot> list(const std::string& principal);
  // At the server's exit: cancels every task still working and waits, up to `limit`, for their
  // work to return (a cancelled run's trace then ends as cancelled, not as interrupted). False if
  // some work was still running then.
  bool cancel_all(std::chrono::milliseconds limit);

  // Called (without the registry's lock) after every change of a task: its status, its status
  // message. Set once, before the first task starts.
  using Observer = std::function<void(const std::string& principal, const TaskSnapshot& task)>;
  void set_observer(Observer observer) { observer_ = std::move(observer); }

 private:
  struct Entry;
  void reap_locked(std::vector<std::thread>& joinable);
  TaskSnapshot snapshot_locked(const Entry& e) const;

  std::mutex mu_;
  std::condition_variable_any changed_;
  std::map<std::string, std::shared_ptr<Entry>> tasks_;
  bool stopping_ = false;
  Observer observer_;
  void notify(const std::string& principal, const TaskSnapshot& snap) {
    if (observer_) observer_(principal, snap);
  }
};

}  // namespace kiln::server
