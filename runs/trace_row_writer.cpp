// See trace_row_writer.h: one thread, started with the first row, that drains a queue of INSERTs.
#include "runs/trace_row_writer.h"

#include <iterator>
#include <memory>
#include <span>
#include <vector>

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
    jobs_.push_back({std::move(record), done});
    if (!thread_.joinable()) thread_ = std::jthread([this](std::stop_token stop) { run(stop); });
  }
  cv_.notify_one();
  return f;
}

void TraceRowWriter::run(std::stop_token stop) {
  for (;;) {
    std::vector<Job> batch;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, stop, [&] { return !jobs_.empty(); });
      // A stop drains what is queued first: a run may be waiting for its row.
      if (jobs_.empty()) return;
      batch.assign(std::make_move_iterator(jobs_.begin()), std::make_move_iterator(jobs_.end()));
      jobs_.clear();
    }
    std::vector<traces::TraceRecord> records;
    records.reserve(batch.size());
    for (auto& j : batch) records.push_back(std::move(j.record));
    auto results = store_.insert_started(std::span<const traces::TraceRecord>(records));
    for (std::size_t i = 0; i < batch.size(); ++i) {
      auto& ok = results[i];
      if (ok) batch[i].done->set_value({});
      else batch[i].done->set_value(fail(ok.error().code, "could not record the run's trace: " + ok.error().message));
    }
  }
}

}  // namespace kiln::server
