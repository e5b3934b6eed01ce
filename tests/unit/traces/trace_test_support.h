// Helpers the trace store's unit tests share: a temporary state directory and short ways to
// start and finish records.
#pragma once

#include <doctest/doctest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>

#include "traces/trace_store.h"
#include "../temp_dir.h"

namespace kiln::traces::testing {

// A scratch folder named for these tests (tests/unit/temp_dir.h).
struct TempDir : kiln::test::TempDir {
  TempDir() : kiln::test::TempDir("kiln-traces-test") {}
};

inline std::unique_ptr<TraceStore> open_store(const std::string& dir) {
  auto s = TraceStore::open(dir);
  REQUIRE_MESSAGE(s.has_value(), (s ? "" : s.error().message));
  return std::move(*s);
}

inline TraceRecord start(TraceStore& s, std::string kind = "exec", std::string ws = "ws_1", std::string started_at = "",
                  std::optional<std::string> parent = std::nullopt) {
  TraceStart st;
  st.kind = std::move(kind);
  st.workspace_id = std::move(ws);
  st.command = "make";
  st.started_at = std::move(started_at);
  st.parent_id = std::move(parent);
  auto r = s.start(st);
  REQUIRE_MESSAGE(r.has_value(), (r ? "" : r.error().message));
  return *r;
}

inline void finish(TraceStore& s, const std::string& id, std::string status) {
  TraceFinish f;
  f.status = std::move(status);
  auto r = s.finish(id, f);
  REQUIRE_MESSAGE(r.has_value(), (r ? "" : r.error().message));
}

inline void write_file(const std::string& path, const std::string& data) {
  std::ofstream(path, std::ios::binary) << data;
}

inline std::string status_of(TraceStore& s, const std::string& id) {
  auto r = s.get(id);
  REQUIRE(r);
  REQUIRE(r->has_value());
  return (*r)->status;
}

}  // namespace kiln::traces::testing
