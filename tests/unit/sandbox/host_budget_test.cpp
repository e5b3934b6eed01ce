// The server-wide ceilings: admission by count, memory and pids, waiting for room, giving it back.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "sandbox/host_budget.h"

using namespace kiln::sandbox;
using namespace std::chrono_literals;

TEST_CASE("sandboxes are admitted until the count, memory or pids ceiling would be passed") {
  HostBudget b(HostCeilings{.max_sandboxes = 3, .memory_mb = 4096, .pids = 3000, .disk_reserve_mb = 1});
  auto a = b.try_acquire({2048, 1024});
  auto c = b.try_acquire({2048, 1024});
  REQUIRE(a);
  REQUIRE(c);
  auto d = b.try_acquire({1, 1});
  REQUIRE_FALSE(d);
  CHECK(d.error().message.find("4096 MiB") != std::string::npos);
  a->release();
  auto e = b.try_acquire({1024, 1000});
  REQUIRE(e);
  CHECK_FALSE(b.try_acquire({512, 1000}));  // pids: 1024 + 1000 + 1000 > 3000
  auto f = b.try_acquire({1, 1});
  REQUIRE(f);
  auto g = b.try_acquire({1, 1});
  REQUIRE_FALSE(g);  // three live: the count ceiling
  CHECK(g.error().message.find("3 sandboxes are live") != std::string::npos);
}

TEST_CASE("a lease gives its room back once, also when moved or destroyed") {
  HostBudget b(HostCeilings{.max_sandboxes = 1, .memory_mb = 100, .pids = 100});
  {
    auto a = b.try_acquire({100, 100});
    REQUIRE(a);
    HostBudget::Lease moved = std::move(*a);
    a->release();  // the moved-from lease holds nothing
    CHECK_FALSE(b.try_acquire({1, 1}));
  }
  auto again = b.try_acquire({100, 100});
  CHECK(again);
}

TEST_CASE("acquire waits for room, gives up at its deadline or when stopped, and never waits for the impossible") {
  HostBudget b(HostCeilings{.max_sandboxes = 1, .memory_mb = 100, .pids = 100});
  auto held = b.try_acquire({10, 10});
  REQUIRE(held);
  auto late = b.acquire({10, 10}, {}, std::chrono::steady_clock::now() + 50ms);
  REQUIRE_FALSE(late);
  CHECK(late.error().code == kiln::Errc::too_large);

  std::stop_source stop;
  std::jthread canceller([&] { stop.request_stop(); });
  auto cancelled = b.acquire({10, 10}, stop.get_token(), std::chrono::steady_clock::now() + 60s);
  REQUIRE_FALSE(cancelled);
  CHECK(cancelled.error().code == kiln::Errc::cancelled);

  std::jthread freer([&] { held->release(); });
  auto got = b.acquire({10, 10}, {}, std::chrono::steady_clock::now() + 60s);
  CHECK(got);

  auto never = b.acquire({1000, 1}, {}, std::chrono::steady_clock::now() + 60s);
  REQUIRE_FALSE(never);  // bigger than the whole ceiling: refused at once, not after a minute
}

TEST_CASE("defaults come from this host and the reserve is min(2 GiB, 5% of the filesystem)") {
  auto c = host_ceilings_with_defaults({});
  CHECK(c.max_sandboxes == 128);
  CHECK(c.memory_mb >= 1024);
  CHECK(c.pids >= 4096);
  HostBudget b({});
  auto r = b.reserve_bytes_for("/");
  CHECK(r > 0);
  CHECK(r <= (2048ull << 20));
  HostBudget huge(HostCeilings{.disk_reserve_mb = 1ull << 39});
  auto refused = huge.check_free_space("/", "the root");
  REQUIRE_FALSE(refused);
  CHECK(refused.error().message.find("--disk-reserve-mb") != std::string::npos);
}

TEST_CASE("waiters are served in arrival order, and room they wait for is not taken by try_acquire") {
  HostBudget b(HostCeilings{.max_sandboxes = 10, .memory_mb = 100, .pids = 100});
  auto held = b.try_acquire({90, 1});
  REQUIRE(held);
  std::mutex mu;
  std::vector<int> order;
  auto waiter = [&](int who, std::uint64_t mb) {
    return std::jthread([&, who, mb] {
      auto got = b.acquire({mb, 1}, {}, std::chrono::steady_clock::now() + 60s);
      REQUIRE(got);
      {
        std::lock_guard lock(mu);
        order.push_back(who);
      }
      std::this_thread::sleep_for(20ms);
    });
  };
  // The first waiter wants all the memory; the second would fit beside `held` but must not pass it.
  auto first = waiter(1, 100);
  while (b.report().value("waiting", 0) < 1) std::this_thread::sleep_for(1ms);
  auto second = waiter(2, 10);
  while (b.report().value("waiting", 0) < 2) std::this_thread::sleep_for(1ms);
  auto refused = b.try_acquire({5, 1});  // fits, but two are queued ahead of it
  REQUIRE_FALSE(refused);
  CHECK(refused.error().message.find("2 other requests are already waiting") != std::string::npos);
  held->release();
  first.join();
  second.join();
  REQUIRE(order.size() == 2);
  CHECK(order[0] == 1);
  CHECK(order[1] == 2);
  CHECK(b.try_acquire({100, 1}));  // both gave their room back
}

TEST_CASE("a waiter that gives up lets the ones behind it in") {
  HostBudget b(HostCeilings{.max_sandboxes = 10, .memory_mb = 100, .pids = 100});
  auto held = b.try_acquire({60, 1});
  REQUIRE(held);
  std::stop_source stop;
  std::jthread big([&] {
    auto got = b.acquire({100, 1}, stop.get_token(), std::chrono::steady_clock::now() + 60s);
    CHECK_FALSE(got);  // cancelled: it never fits while `held` lives
  });
  while (b.report().value("waiting", 0) < 1) std::this_thread::sleep_for(1ms);
  std::jthread small([&] {
    auto got = b.acquire({30, 1}, {}, std::chrono::steady_clock::now() + 60s);
    CHECK(got);  // fits beside `held`, but queued behind `big` until it leaves
  });
  while (b.report().value("waiting", 0) < 2) std::this_thread::sleep_for(1ms);
  stop.request_stop();
  big.join();
  small.join();
}

TEST_CASE("a waiter keeps its place while `meanwhile` runs between its waits") {
  HostBudget b(HostCeilings{.max_sandboxes = 10, .memory_mb = 100, .pids = 100});
  auto held = b.try_acquire({90, 1});
  REQUIRE(held);
  std::atomic<int> ticks{0};
  std::mutex mu;
  std::vector<int> order;
  auto tick = [&] { ++ticks; };
  std::jthread big([&] {
    auto got = b.acquire({100, 1}, {}, std::chrono::steady_clock::now() + 60s, tick, 5ms);
    REQUIRE(got);
    std::lock_guard lock(mu);
    order.push_back(1);
  });
  while (b.report().value("waiting", 0) < 1) std::this_thread::sleep_for(1ms);
  std::jthread small([&] {
    auto got = b.acquire({10, 1}, {}, std::chrono::steady_clock::now() + 60s, tick, 5ms);
    REQUIRE(got);
    std::lock_guard lock(mu);
    order.push_back(2);
  });
  while (ticks < 10) std::this_thread::sleep_for(1ms);  // both have woken and gone back several times
  CHECK(b.report().value("waiting", 0) == 2);
  held->release();
  big.join();
  small.join();
  REQUIRE(order.size() == 2);
  CHECK(order[0] == 1);
}
