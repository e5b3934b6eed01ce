// The trace row writer: a run's first row written on its own thread, the command held until it is
// in (ExecRequest::before_start), and every queued row written before the writer goes away.
#include <doctest/doctest.h>

#include <optional>
#include <span>
#include <thread>
#include <vector>

#include "../temp_dir.h"
#include "runs/trace_row_writer.h"
#include "traces/trace_store.h"

using kiln::server::TraceRowWriter;
using namespace kiln::traces;

namespace {

std::unique_ptr<TraceStore> open_store(const std::string& dir) {
  auto s = TraceStore::open(dir);
  REQUIRE_MESSAGE(s.has_value(), (s ? "" : s.error().message));
  return std::move(*s);
}

TraceStart exec_start() {
  TraceStart st;
  st.kind = "exec";
  st.workspace_id = "ws_1";
  st.command = "make";
  return st;
}

}  // namespace

TEST_CASE("a row written on the writer thread is a running record once its future says so") {
  kiln::test::TempDir t("kiln-runs-test");
  auto store = open_store(t.path);
  TraceRowWriter writer(*store);
  auto rec = store->prepare_start(exec_start());
  REQUIRE(rec);
  const std::string id = rec->id;
  auto before = store->get(id);
  REQUIRE(before);
  CHECK_FALSE(before->has_value());  // prepared only: nothing written yet
  auto done = writer.write(*rec);
  REQUIRE(done.get());
  auto got = store->get(id);
  REQUIRE(got);
  REQUIRE(got->has_value());
  CHECK((*got)->status == "running");
  CHECK((*got)->command == "make");
  // The same id again is another record's: an error that says the trace could not be recorded.
  auto again = writer.write(*rec).get();
  REQUIRE_FALSE(again);
  CHECK(again.error().message.find("could not record the run's trace") != std::string::npos);
}

TEST_CASE("every queued row is written before the writer goes away") {
  kiln::test::TempDir t("kiln-runs-test");
  auto store = open_store(t.path);
  std::vector<std::string> ids;
  std::vector<std::shared_future<kiln::Result<void>>> done;
  {
    TraceRowWriter writer(*store);
    for (int i = 0; i < 50; ++i) {
      auto rec = store->prepare_start(exec_start());
      REQUIRE(rec);
      ids.push_back(rec->id);
      done.push_back(writer.write(std::move(*rec)));
    }
  }
  for (auto& d : done) CHECK(d.get());
  for (const auto& id : ids) {
    auto got = store->get(id);
    REQUIRE(got);
    CHECK(got->has_value());
  }
}

TEST_CASE("a record with a parent is not written without its check") {
  kiln::test::TempDir t("kiln-runs-test");
  auto store = open_store(t.path);
  auto st = exec_start();
  st.parent_id = "tr_0000000000000000";
  auto rec = store->prepare_start(st);
  REQUIRE(rec);
  CHECK(store->insert_started(*rec).error().code == kiln::Errc::internal);
  CHECK(store->start(st).error().code == kiln::Errc::not_found);
}

TEST_CASE("rows written together in one transaction: one that fails leaves the others in") {
  kiln::test::TempDir t("kiln-runs-test");
  auto store = open_store(t.path);
  auto first = store->prepare_start(exec_start());
  REQUIRE(first);
  REQUIRE(store->insert_started(*first));
  std::vector<TraceRecord> batch;
  for (int i = 0; i < 5; ++i) {
    auto rec = store->prepare_start(exec_start());
    REQUIRE(rec);
    batch.push_back(*rec);
  }
  batch.insert(batch.begin() + 2, *first);  // its id is taken: a conflict in the middle of the batch
  auto parented = store->prepare_start(exec_start());
  REQUIRE(parented);
  parented->parent_id = "tr_0000000000000000";
  batch.push_back(*parented);
  auto results = store->insert_started(std::span<const TraceRecord>(batch));
  REQUIRE(results.size() == batch.size());
  for (std::size_t i = 0; i < batch.size(); ++i) {
    CAPTURE(i);
    if (i == 2) CHECK(results[i].error().code == kiln::Errc::conflict);
    else if (i == batch.size() - 1) CHECK(results[i].error().code == kiln::Errc::internal);
    else {
      REQUIRE(results[i]);
      auto got = store->get(batch[i].id);
      REQUIRE(got);
      REQUIRE(got->has_value());
      CHECK((*got)->status == "running");
    }
  }
  auto orphan = store->get(parented->id);
  REQUIRE(orphan);
  CHECK_FALSE(orphan->has_value());
}

TEST_CASE("rows queued from many threads at once are all written, each future with its own answer") {
  kiln::test::TempDir t("kiln-runs-test");
  auto store = open_store(t.path);
  TraceRowWriter writer(*store);
  auto taken = store->prepare_start(exec_start());
  REQUIRE(taken);
  REQUIRE(writer.write(*taken).get());
  std::vector<std::string> ids(64);
  std::vector<kiln::Result<void>> answers(64);
  std::vector<std::thread> threads;
  for (int i = 0; i < 64; ++i)
    threads.emplace_back([&, i] {
      auto rec = i % 16 == 5 ? std::optional<TraceRecord>(*taken) : std::optional<TraceRecord>(*store->prepare_start(exec_start()));
      ids[i] = rec->id;
      answers[i] = writer.write(std::move(*rec)).get();
    });
  for (auto& th : threads) th.join();
  for (int i = 0; i < 64; ++i) {
    CAPTURE(i);
    if (i % 16 == 5) {
      CHECK_FALSE(answers[i]);  // the taken id: only its own call fails
      continue;
    }
    REQUIRE(answers[i]);
    auto got = store->get(ids[i]);
    REQUIRE(got);
    CHECK(got->has_value());
  }
}
