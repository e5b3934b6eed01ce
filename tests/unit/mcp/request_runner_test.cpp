// RequestRunner (case 34): requests blocked in slow work never keep a later quick one waiting,
// up to the cap; past it jobs queue, and stopping drops what has not started.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>

#include "mcp/request_runner.h"

using kiln::server::RequestRunner;

namespace {

struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  void wait() {
    std::unique_lock l(mu);
    cv.wait(l, [&] { return open; });
  }
  void release() {
    {
      std::lock_guard l(mu);
      open = true;
    }
    cv.notify_all();
  }
  bool wait_for(std::atomic<int>& n, int want) {
    std::unique_lock l(mu);
    return cv.wait_for(l, std::chrono::seconds(20), [&] { return n.load() >= want; });
  }
};

}  // namespace

TEST_CASE("ten blocked jobs (more than the warm threads) do not hold up an eleventh") {
  RequestRunner runner(64, 8);
  Gate slow, seen;
  std::atomic<int> quick{0};
  for (int i = 0; i < 10; ++i) runner.post([&] { slow.wait(); });
  runner.post([&] {
    ++quick;
    seen.cv.notify_all();
  });
  CHECK(seen.wait_for(quick, 1));  // would wait forever with a fixed pool of 8
  slow.release();
  runner.stop_and_join();
}

TEST_CASE("past the cap, jobs wait for a free thread; stop drops those not started") {
  RequestRunner runner(2, 1);
  Gate slow, seen;
  std::atomic<int> ran{0};
  for (int i = 0; i < 2; ++i) runner.post([&] {
    ++ran;
    seen.cv.notify_all();
    slow.wait();
  });
  runner.post([&] {
    ran += 100;
    seen.cv.notify_all();
  });
  CHECK(seen.wait_for(ran, 2));
  CHECK(ran.load() == 2);  // the third is queued behind the cap
  slow.release();
  CHECK(seen.wait_for(ran, 102));
  runner.stop_and_join();
  runner.post([&] { ran += 1000; });  // after stop: dropped
  CHECK(ran.load() < 1000);
}
