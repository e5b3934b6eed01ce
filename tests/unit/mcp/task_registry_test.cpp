// TaskRegistry: tasks/cancel runs the work's stop callbacks without the registry's lock, so a
// callback may report a status or read the task (it used to run them under the lock: such a
// callback, or a thread it waits for, blocked every tasks/get of the server).
#include <doctest/doctest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <stop_token>

#include "mcp/tasks.h"

using kiln::server::TaskRegistry;

TEST_CASE("tasks/cancel: the work's stop callbacks may use the registry; the task ends cancelled") {
  TaskRegistry reg;
  std::mutex mu;
  std::condition_variable_any cv;
  std::string id;
  std::atomic<bool> read_in_callback{false};
  bool listening = false;  // the work's callback is registered: the cancel below runs it
  auto first = reg.start("bob", std::nullopt, [&](std::stop_token stop, std::function<void(std::string)> status) {
    std::stop_callback on_stop(stop, [&] {
      status("stopping");  // takes the registry's lock
      {
        std::lock_guard l(mu);
        read_in_callback = reg.get("bob", id).has_value();
      }
    });
    std::unique_lock l(mu);
    listening = true;
    cv.notify_all();
    cv.wait(l, stop, [] { return false; });  // until cancelled
    return kiln::server::MethodResult(nlohmann::json{{"content", nlohmann::json::array()}});
  });
  REQUIRE(first);
  {
    std::unique_lock l(mu);
    id = first->id;
    cv.wait(l, [&] { return listening; });
  }
  TaskRegistry::Cancel c = reg.cancel("bob", id);
  CHECK(c == TaskRegistry::Cancel::requested);
  CHECK(read_in_callback);
  auto after = reg.wait("bob", id, {});
  REQUIRE(after);
  CHECK(after->status == "cancelled");
  CHECK(reg.cancel("bob", id) == TaskRegistry::Cancel::already_terminal);
  CHECK_FALSE(reg.get("alice", id));  // another principal's task is not found
}
