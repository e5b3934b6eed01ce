// The trace row writer: a run's first row written on its own thread, the command held until it is
// in (ExecRequest::before_start), and every queued row written before the writer goes away.
#include <doctest/doctest.h>

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
