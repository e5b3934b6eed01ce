// See trace_row_writer.h: one thread, started with the first row, that drains a queue of INSERTs.
#include "runs/trace_row_writer.h"

#include <memory>

namespace kiln::server {

TraceRowWriter::~TraceRowWriter() {
  if (thread_.joinable()) {
    thread_.request_stop();
    cv_.notify_all();
    thread_.join();
  }
}

std::shared_future<Result<void>> TraceRowWriter::write(traces::TraceRecord record) {
  auto done = std::make_shared<std::promise<Result<void>>>();
  std::shared_future<Result<void>> f = done->get_future().share();
  {
    std::lock_guard lock(mu_);
    jobs_.push_back([this, done, record = std::move(record)] {
      auto ok = store_.insert_started(record);
      if (ok) done->set_value({});
      else done->set_value(fail(ok.error().code, "could not record the run's trace: " + ok.error().message));
    });
    if (!thread_.joinable()) thread_ = std::jthread([this](std::stop_token stop) { run(stop); });
  }
  cv_.notify_one();
  return f;
}

void TraceRowWriter::run(std::stop_token stop) {
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, stop, [&] { return !jobs_.empty(); });
      // A stop drains what is queued first: a run may be waiting for its row.
      if (jobs_.empty()) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    job();
  }
}

}  // namespace kiln::server
