// Writes the first row of a run's trace on a thread of its own, so the run is prepared (its
// checkpoint, pipes and cgroup) beside the INSERT instead of after it. The command still starts
// only once the row is in: the caller waits on the returned future just before it hands the
// command to the sandbox (ExecRequest::before_start). Rows queued while one is written go in
// together, in one transaction: many sandboxes started at once share their commits.
#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <future>
#include <mutex>
#include <stop_token>
#include <thread>

#include "core/error.h"
#include "traces/trace_store.h"

namespace kiln::server {

class TraceRowWriter {
 public:
  explicit TraceRowWriter(traces::TraceStore& store) : store_(store) {}
  // Every queued row is written before the thread ends.
  ~TraceRowWriter();
  TraceRowWriter(const TraceRowWriter&) = delete;
  TraceRowWriter& operator=(const TraceRowWriter&) = delete;

  // Queues the INSERT of `record` (from TraceStore::prepare_start); the future says how it went.
  std::shared_future<Result<void>> write(traces::TraceRecord record);

 private:
  void run(std::stop_token stop);

  traces::TraceStore& store_;
  std::mutex mu_;
  std::condition_variable_any cv_;
  struct Job {
    traces::TraceRecord record;
    std::shared_ptr<std::promise<Result<void>>> done;
  };
  std::deque<Job> jobs_;
  std::jthread thread_;  // last: stopped and joined before the queue it drains goes away
};

}  // namespace kiln::server
