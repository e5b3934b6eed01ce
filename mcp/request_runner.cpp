// A thread per running request, up to a cap, with a few kept warm: requests of one session no
// longer queue behind each other's slow work.
#include "mcp/request_runner.h"

namespace kiln::server {

RequestRunner::RequestRunner(std::size_t max_threads, std::size_t keep_idle)
    : max_threads_(max_threads == 0 ? 1 : max_threads), keep_idle_(keep_idle) {}

RequestRunner::~RequestRunner() { stop_and_join(); }

void RequestRunner::reap_locked(std::vector<std::thread>& out) {
  for (auto id : finished_) {
    auto it = threads_.find(id);
    if (it == threads_.end()) continue;
    out.push_back(std::move(it->second));
    threads_.erase(it);
  }
  finished_.clear();
}

void RequestRunner::post(std::function<void()> job) {
  std::vector<std::thread> done;
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    queue_.push_back(std::move(job));
    reap_locked(done);
    if (idle_ >= queue_.size()) {
      cv_.notify_one();
    } else if (threads_.size() < max_threads_) {
      std::thread t([this] { worker(); });
      threads_.emplace(t.get_id(), std::move(t));
    }
    // else: every thread is busy and the cap is reached; the job waits for the first one free.
  }
  for (auto& t : done) t.join();  // already returned from worker(), so this does not wait
}

void RequestRunner::worker() {
  std::unique_lock lock(mu_);
  for (;;) {
    if (queue_.empty() && !stopping_) {
      // Warm threads wait for the next job; the extra ones leave after a short linger.
      ++idle_;
      if (threads_.size() - finished_.size() <= keep_idle_) {
        cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      } else {
        cv_.wait_for(lock, std::chrono::seconds(5), [this] { return stopping_ || !queue_.empty(); });
      }
      --idle_;
    }
    if (stopping_ || queue_.empty()) break;
    auto job = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    job();
    job = nullptr;  // what it captured is released before the lock is taken again
    lock.lock();
  }
  finished_.push_back(std::this_thread::get_id());
}

void RequestRunner::stop_and_join() {
  std::deque<std::function<void()>> dropped;
  std::map<std::thread::id, std::thread> all;
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    dropped.swap(queue_);
    all.swap(threads_);
    finished_.clear();
    cv_.notify_all();
  }
  dropped.clear();  // outside the lock: a job's captures may run destructors that post
  for (auto& [id, t] : all) {
    if (t.joinable() && t.get_id() != std::this_thread::get_id()) t.join();
    else if (t.joinable()) t.detach();
  }
}

}  // namespace kiln::server
