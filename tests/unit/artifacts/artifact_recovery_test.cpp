// Crash leftovers of the blob store are reclaimed when a store opens: a dead publisher's temp
// copies go, a live one's stay; a blob an unpublish moved to the trash before dying goes back when
// its version still stands, and anything else in the trash is deleted.
#include <unistd.h>

#include <filesystem>

#include "artifact_test_support.h"
#include "artifacts/artifact_internal.h"
#include "core/owner_tag.h"

using namespace kiln;
using namespace kiln::artifacts;
using namespace kiln::artifacts::testing;

TEST_CASE("opening the store reclaims temp copies of dead writers and an interrupted unpublish's trash") {
  Fixture f;
  f.publish("site");
  auto index = f.store->resolve("site", 1, "index.html");
  REQUIRE(index);
  const std::string tmp = f.state.path + "/blobs/tmp/", trash = f.state.path + "/blobs/trash/";

  // An unpublish killed between moving the blob away and its commit: the version still stands.
  std::filesystem::rename(index->blob_path, trash + index->sha256 + ".0000abcd");
  // One killed after its commit: nothing references this one.
  write_file(trash + std::string(64, 'a') + ".00000001", "gone");
  write_file(tmp + "blob.o2147483646-1.AbCdEf", "dead writer");           // no such process
  write_file(tmp + "blob." + kiln::owner_tag() + ".GhIjKl", "live writer");  // this process
  write_file(tmp + "blob.MnOpQr", "older server, young file");           // no tag: age rule

  f.reopen();
  CHECK(f.served("site", 1, "index.html") == "<h1>home</h1>");
  CHECK(std::filesystem::exists(index->blob_path));
  CHECK(std::filesystem::is_empty(f.state.path + "/blobs/trash"));
  CHECK_FALSE(std::filesystem::exists(tmp + "blob.o2147483646-1.AbCdEf"));
  CHECK(std::filesystem::exists(tmp + "blob." + kiln::owner_tag() + ".GhIjKl"));
  CHECK(std::filesystem::exists(tmp + "blob.MnOpQr"));
}

TEST_CASE("a full disk is named in the error with what to do") {
  CHECK(detail::write_failure("/s", ENOSPC).find("is full") != std::string::npos);
  CHECK(detail::write_failure("/s", ENOSPC).find("KILN_HOME") != std::string::npos);
  CHECK(detail::write_failure("/s", EIO).find("cannot write to /s") != std::string::npos);
}
