// Runs a session's requests on threads of their own, so slow calls (a long sandbox_exec, a big
// search) never make a quick one (a small file_read) wait behind them: a fixed pool of N workers
// would let N slow calls of one client starve all its others (security case 34).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

namespace kiln::server {

class RequestRunner {
 public:
  // Up to `max_threads` jobs run at once (further ones wait their turn); `keep_idle` threads stay
  // for the next jobs, the others end once they find nothing to do.
  RequestRunner(std::size_t max_threads, std::size_t keep_idle);
  ~RequestRunner();  // stop_and_join()
  RequestRunner(const RequestRunner&) = delete;
  RequestRunner& operator=(const RequestRunner&) = delete;

  void post(std::function<void()> job);
  // Drops jobs not yet started and waits for the running ones to return.
  void stop_and_join();

 private:
  void worker();
  void reap_locked(std::vector<std::thread>& out);

  const std::size_t max_threads_, keep_idle_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  std::size_t idle_ = 0;
  bool stopping_ = false;
  std::map<std::thread::id, std::thread> threads_;
  std::vector<std::thread::id> finished_;  // ended workers not joined yet
};

}  // namespace kiln::server
