// Data folders: made private, locked by one holder at a time (a second is refused, or waits), let
// go on close, and never reached through a symlink planted on the way.
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include "services/data_folder.h"

#include "../temp_dir.h"

using namespace kiln::services;
namespace fs = std::filesystem;

TEST_CASE("a data folder is 0700, identified for the helper, and locked while held") {
  kiln::test::TempDir state("kiln-svc-data-test");
  auto a = open_data_folder(state.path + "/services/ws_1", "db", DataUse::development, "/var/lib/kiln/services/db", 0);
  REQUIRE(a);
  struct stat st {};
  REQUIRE(::stat(a->path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0700);
  CHECK(a->bind.target == "/var/lib/kiln/services/db");
  CHECK(a->bind.ino == std::uint64_t(st.st_ino));
  CHECK(a->path == state.path + "/services/ws_1/db/dev");
  // The same use is refused while held; the other use is a folder (and lock) of its own.
  auto b = open_data_folder(state.path + "/services/ws_1", "db", DataUse::development, "/var/lib/kiln/services/db", 0);
  REQUIRE_FALSE(b);
  CHECK(b.error().code == kiln::Errc::conflict);
  auto v = open_data_folder(state.path + "/services/ws_1", "db", DataUse::verify, "/var/lib/kiln/services/db", 0);
  REQUIRE(v);
  CHECK(v->path != a->path);
  a->lock.reset();
  CHECK(open_data_folder(state.path + "/services/ws_1", "db", DataUse::development, "/var/lib/kiln/services/db", 0));
}

TEST_CASE("a waiting holder gets the lock when the first lets go") {
  kiln::test::TempDir state("kiln-svc-data-test");
  auto a = open_data_folder(state.path + "/services/ws_1", "db", DataUse::verify, "/var/lib/kiln/services/db", 0);
  REQUIRE(a);
  std::thread release([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    a->lock.reset();
  });
  auto b = open_data_folder(state.path + "/services/ws_1", "db", DataUse::verify, "/var/lib/kiln/services/db", 10000);
  release.join();
  CHECK(b);
}

TEST_CASE("a symlink planted where the folder goes is not followed") {
  kiln::test::TempDir state("kiln-svc-data-test");
  kiln::test::TempDir elsewhere("kiln-svc-data-elsewhere");
  fs::create_directories(state.path + "/services/ws_1/db");
  fs::create_directory_symlink(elsewhere.path, state.path + "/services/ws_1/db/dev");
  auto a = open_data_folder(state.path + "/services/ws_1", "db", DataUse::development, "/var/lib/kiln/services/db", 0);
  REQUIRE_FALSE(a);
  CHECK(a.error().message.find("without following links") != std::string::npos);
}

TEST_CASE("a folder some process works in is in use until it leaves") {
  kiln::test::TempDir dir("kiln-svc-data-test");
  CHECK(wait_until_unused(dir.path + "/missing", 0));  // nothing there: unused
  CHECK(wait_until_unused(dir.path, 0));
  pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    if (::chdir(dir.path.c_str()) != 0) ::_exit(1);
    ::sleep(30);
    ::_exit(0);
  }
  // Until the child has changed folder, it may not be seen yet.
  bool seen = false;
  for (int i = 0; i < 100 && !seen; ++i) {
    seen = !wait_until_unused(dir.path, 0).has_value();
    if (!seen) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  CHECK(seen);
  auto busy = wait_until_unused(dir.path, 100);
  REQUIRE_FALSE(busy);
  CHECK(busy.error().message.find("still works in") != std::string::npos);
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  CHECK(wait_until_unused(dir.path, 1000));
}
