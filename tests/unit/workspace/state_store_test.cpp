// The state store: a fresh directory, a reopened one, and two stores (two kiln processes) sharing
// one directory.
#include <doctest/doctest.h>

#include <stdlib.h>

#include <filesystem>
#include <thread>
#include <vector>

#include "workspace/state_store.h"
#include "../temp_dir.h"

using kiln::workspace::StateStore;

namespace {

// A scratch folder named for these tests (tests/unit/temp_dir.h).
struct TempDir : kiln::test::TempDir {
  TempDir() : kiln::test::TempDir("kiln-store-test") {}
};

}  // namespace

TEST_CASE("a fresh state directory is created, in WAL mode, private to the user") {
  TempDir t;
  std::string dir = t.path + "/nested/state";
  auto store = StateStore::open(dir);
  REQUIRE_MESSAGE(store.has_value(), (store ? "" : store.error().message));
  CHECK(std::filesystem::exists(dir + "/kiln.db"));
  auto perms = std::filesystem::status(dir).permissions();
  CHECK((perms & std::filesystem::perms::others_all) == std::filesystem::perms::none);
  CHECK((perms & std::filesystem::perms::group_all) == std::filesystem::perms::none);
}

TEST_CASE("workspaces are recorded once per root, names made unique, and survive a reopen") {
  TempDir t;
  std::string id;
  {
    auto store = StateStore::open(t.path);
    REQUIRE(store);
    bool created = false;
    auto a = (*store)->open_workspace("/srv/one/app", "", &created);
    REQUIRE(a);
    CHECK(created);
    CHECK(a->name == "app");
    id = a->id;
    auto b = (*store)->open_workspace("/srv/two/app", "", &created);
    REQUIRE(b);
    CHECK(created);
    CHECK(b->name == "app-2");
    auto again = (*store)->open_workspace("/srv/one/app", "", &created);
    REQUIRE(again);
    CHECK_FALSE(created);
    CHECK(again->id == id);
  }
  auto reopened = StateStore::open(t.path);
  REQUIRE(reopened);
  auto found = (*reopened)->find_workspace("app-2");
  REQUIRE(found);
  REQUIRE(found->has_value());
  CHECK((*found)->root == "/srv/two/app");
  auto by_id = (*reopened)->find_workspace(id);
  REQUIRE(by_id);
  REQUIRE(by_id->has_value());
  CHECK((*by_id)->root == "/srv/one/app");
  auto list = (*reopened)->list_workspaces();
  REQUIRE(list);
  CHECK(list->size() == 2);
  auto missing = (*reopened)->find_workspace("nope");
  REQUIRE(missing);
  CHECK_FALSE(missing->has_value());
}

TEST_CASE("two stores on one directory register the same root once, concurrently") {
  TempDir t;
  auto s1 = StateStore::open(t.path);
  auto s2 = StateStore::open(t.path);
  REQUIRE(s1);
  REQUIRE(s2);
  std::vector<std::string> ids(2);
  std::thread a([&] { ids[0] = (*s1)->open_workspace("/srv/shared", "", nullptr)->id; });
  std::thread b([&] { ids[1] = (*s2)->open_workspace("/srv/shared", "", nullptr)->id; });
  a.join();
  b.join();
  CHECK(ids[0] == ids[1]);
  auto list = (*s1)->list_workspaces();
  REQUIRE(list);
  CHECK(list->size() == 1);
}
