// App versions: the run configuration stored with a version (and read back as it was written),
// is_app following the latest version, folders only, and the schema step that adds the column to
// a database made before apps existed.
#include "artifact_test_support.h"

#include "db/database.h"
#include "db/statement.h"

using namespace kiln;
using namespace kiln::artifacts;
using namespace kiln::artifacts::testing;
using nlohmann::json;

namespace {

json sample_app() {
  return {{"app", {{"argv", {"/bin/sh", "-c", "node server.js"}}, {"services", {"db"}}, {"idle_s", 0}}},
          {"services", json::array({{{"name", "db"}, {"kind", "postgres"}, {"port", 5432}}})}};
}

}  // namespace

TEST_CASE("an app version keeps its configuration; is_app follows the latest version") {
  Fixture f;
  auto req = f.request("site", "tracker");
  req.app = sample_app();
  auto r = f.publish(req);
  REQUIRE(r.version.app);
  CHECK(*r.version.app == sample_app());
  CHECK(r.artifact.is_app());

  f.reopen();  // read back from the database, not from the publish's own answer
  auto a = f.store->get("tracker");
  REQUIRE(a);
  REQUIRE(*a);
  REQUIRE((*a)->versions.size() == 1);
  CHECK((*a)->versions[0].app == sample_app());
  CHECK((*a)->is_app());

  // A static version on top: the artifact is a site again, the older version stays an app.
  f.publish("site", "tracker");
  a = f.store->get("tracker");
  REQUIRE(a);
  REQUIRE((*a)->versions.size() == 2);
  CHECK_FALSE((*a)->is_app());
  CHECK((*a)->versions[0].app.has_value());
  CHECK_FALSE((*a)->versions[1].app.has_value());
  auto list = f.store->list("");
  REQUIRE(list);
  REQUIRE(list->size() == 1);
  CHECK_FALSE(list->front().is_app());
}

TEST_CASE("a static publish is no app; an artifact without versions is none either") {
  Fixture f;
  auto r = f.publish("site");
  CHECK_FALSE(r.version.app.has_value());
  CHECK_FALSE(r.artifact.is_app());
  CHECK_FALSE(ArtifactInfo{}.is_app());
}

TEST_CASE("only a folder can be an app, and nothing is stored when it is refused") {
  Fixture f;
  auto req = f.request("report.html", "report");
  req.app = sample_app();
  auto r = f.store->publish(req);
  REQUIRE_FALSE(r);
  CHECK(r.error().code == Errc::invalid_argument);
  CHECK(r.error().message.find("only a folder can be published as an app") != std::string::npos);
  auto a = f.store->get("report");
  REQUIRE(a);
  CHECK_FALSE(a->has_value());
  CHECK(f.blob_count() == 0);
}

TEST_CASE("a database from before apps gains the app column and keeps its versions static") {
  Fixture f;
  f.publish("site", "old");
  f.store.reset();
  {
    // Put the database back where schema version 2 left it: no app column.
    auto db = db::Database::open(f.state.path + "/artifacts.db", {.label = "artifact"});
    REQUIRE(db);
    REQUIRE(db->exec("ALTER TABLE versions DROP COLUMN app; PRAGMA user_version = 2;"));
  }
  f.reopen();
  {
    auto db = db::Database::open(f.state.path + "/artifacts.db", {.label = "artifact"});
    REQUIRE(db);
    db::Statement s(*db, "PRAGMA user_version");
    REQUIRE(s.next("user_version").value_or(false));
    CHECK(s.int64(0) == 3);
  }
  auto a = f.store->get("old");
  REQUIRE(a);
  REQUIRE(*a);
  REQUIRE((*a)->versions.size() == 1);
  CHECK_FALSE((*a)->versions[0].app.has_value());
  CHECK_FALSE((*a)->is_app());
  CHECK(f.served("old", 1, "") == "<h1>home</h1>");

  auto req = f.request("site", "old");
  req.app = sample_app();
  auto r = f.publish(req);
  CHECK(r.version.number == 2);
  CHECK(r.artifact.is_app());
}
