// Helpers the artifact store's unit tests share: temporary state and workspace folders, a
// controllable clock, and short ways to publish and read back.
#pragma once

#include <doctest/doctest.h>
#include <stdlib.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "artifacts/artifact_store.h"
#include "workspace/root.h"
#include "../temp_dir.h"

namespace kiln::artifacts::testing {

// A scratch folder named for these tests (tests/unit/temp_dir.h).
struct TempDir : kiln::test::TempDir {
  TempDir() : kiln::test::TempDir("kiln-artifacts-test") {}
};

inline void write_file(const std::string& path, const std::string& data) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << data;
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A state dir, a workspace folder and a store whose clock the test moves.
struct Fixture {
  TempDir state, ws;
  std::shared_ptr<std::atomic<std::int64_t>> clock = std::make_shared<std::atomic<std::int64_t>>(1'800'000'000);
  std::unique_ptr<ArtifactStore> store;
  std::unique_ptr<workspace::Root> root;

  Fixture() {
    write_file(ws.path + "/site/index.html", "<h1>home</h1>");
    write_file(ws.path + "/site/css/site.css", "body{}");
    write_file(ws.path + "/site/sub/index.html", "<h1>sub</h1>");
    write_file(ws.path + "/site/sub/page.html", "<p>page</p>");
    write_file(ws.path + "/report.html", "<h1>report</h1>");
    reopen();
    auto r = workspace::Root::open(ws.path);
    REQUIRE_MESSAGE(r.has_value(), (r ? "" : r.error().message));
    root = std::make_unique<workspace::Root>(std::move(*r));
  }

  void reopen() {
    store.reset();
    auto s = ArtifactStore::open(state.path);
    REQUIRE_MESSAGE(s.has_value(), (s ? "" : s.error().message));
    store = std::move(*s);
    auto c = clock;
    store->set_clock([c] { return c->load(); });
  }

  void advance(std::int64_t s) { *clock += s; }

  PublishRequest request(const std::string& path, const std::string& name = "") const {
    PublishRequest req;
    req.workspace_id = "ws_1";
    req.root = root.get();
    req.path = path;
    req.name = name;
    return req;
  }

  PublishResult publish(const PublishRequest& req) {
    auto r = store->publish(req);
    REQUIRE_MESSAGE(r.has_value(), (r ? "" : r.error().message));
    return *r;
  }
  PublishResult publish(const std::string& path, const std::string& name = "") { return publish(request(path, name)); }

  // The bytes served for a path, or "<Errc N>" when resolve fails.
  std::string served(const std::string& name, std::optional<int> version, const std::string& path) {
    auto f = store->resolve(name, version, path);
    if (!f) return "<" + std::to_string(int(f.error().code)) + ">";
    return read_file(f->blob_path);
  }

  std::size_t blob_count() const {
    std::size_t n = 0;
    for (const auto& e : std::filesystem::recursive_directory_iterator(state.path + "/blobs/sha256"))
      if (e.is_regular_file()) ++n;
    return n;
  }
};

inline const std::string kNotFound = "<" + std::to_string(int(Errc::not_found)) + ">";

}  // namespace kiln::artifacts::testing
