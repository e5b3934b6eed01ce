// A fixed set of threads taking jobs in order. kiln serve's app side needs threads that live as
// long as the server: a sandbox's helper dies with the thread that started it (its parent-death
// signal follows the creating thread), and admission must never run on the listener's io threads.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <stop_token>
#include <thread>
#include <vector>

namespace kiln::server::apps {

class WorkQueue {
 public:
  explicit WorkQueue(int threads) {
    for (int i = 0; i < threads; ++i)
      threads_.emplace_back([this](std::stop_token st) {
        for (;;) {
          std::function<void()> job;
          {
            std::unique_lock lock(mu_);
            cv_.wait(lock, st, [this] { return !jobs_.empty(); });
            if (jobs_.empty()) return;  // stopping
            job = std::move(jobs_.front());
            jobs_.pop_front();
          }
          job();
        }
      });
  }
  ~WorkQueue() {
    for (auto& t : threads_) t.request_stop();
    cv_.notify_all();
  }

  void post(std::function<void()> job) {
    {
      std::lock_guard lock(mu_);
      jobs_.push_back(std::move(job));
    }
    cv_.notify_one();
  }

  // Runs `f` on one of the queue's threads and waits for its result.
  template <class F>
  auto run(F f) -> decltype(f()) {
    std::packaged_task<decltype(f())()> task(std::move(f));
    auto result = task.get_future();
    post([&task] { task(); });
    return result.get();
  }

 private:
  std::mutex mu_;
  std::condition_variable_any cv_;
  std::deque<std::function<void()>> jobs_;
  std::vector<std::jthread> threads_;
};

}  // namespace kiln::server::apps
