// TaskRegistry: tasks/cancel runs the work's stop callbacks without the registry's lock, so a
// callback may report a status or read the task (it used to run them under the lock: such a
// callback, or a thread it waits for, blocked every tasks/get of the server), and cancel_all at
// the server's exit.
#include <doctest/doctest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <stop_token>
#include <thread>
#include <utility>

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

TEST_CASE("cancel_all at exit: working tasks end cancelled once their work returns; false while one still runs") {
  TaskRegistry reg;
  auto until_stopped = [](std::stop_token stop, std::function<void(std::string)>) {
    std::mutex m;
    std::condition_variable_any cv;
    std::unique_lock l(m);
    cv.wait(l, stop, [] { return false; });
    return kiln::server::MethodResult(nlohmann::json::object());
  };
  auto a = reg.start("alice", std::nullopt, until_stopped);
  auto b = reg.start("bob", std::nullopt, until_stopped);
  REQUIRE(a);
  REQUIRE(b);
  CHECK(reg.cancel_all(std::chrono::minutes(1)));
  for (auto [who, id] : {std::pair{"alice", a->id}, std::pair{"bob", b->id}}) {
    auto t = reg.get(who, id);
    REQUIRE(t);
    CHECK(t->status == "cancelled");
    CHECK(t->status_message == "cancelled: the server stopped");
  }
  // Work that ignores the stop keeps cancel_all from saying all is done.
  std::atomic<bool> let_go{false};
  auto stubborn = reg.start("carol", std::nullopt, [&](std::stop_token, std::function<void(std::string)>) {
    while (!let_go) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    return kiln::server::MethodResult(nlohmann::json::object());
  });
  REQUIRE(stubborn);
  CHECK_FALSE(reg.cancel_all(std::chrono::milliseconds(30)));
  let_go = true;
  CHECK(reg.cancel_all(std::chrono::minutes(1)));
}
