// migrate(): steps run once each, in order, from the version the database is at; a failing step
// leaves the database as it was; an up-to-date database is only read.
#include <doctest/doctest.h>

#include <chrono>
#include <thread>
#include <vector>

#include "db/migrate.h"
#include "db/transaction.h"
#include "db_test_support.h"

using namespace kiln;
using namespace kiln::db;
using namespace kiln::db::test;

namespace {

constexpr Migration kThree[] = {
    {1, "CREATE TABLE log (step INTEGER);INSERT INTO log VALUES (1);"},
    {2, "INSERT INTO log VALUES (2);"},
    {3, "INSERT INTO log VALUES (3);"},
};

std::vector<std::int64_t> log_of(Database& db) {
  Statement s(db, "SELECT step FROM log ORDER BY rowid");
  std::vector<std::int64_t> out;
  REQUIRE(s.each("log", [&] { out.push_back(s.int64(0)); }));
  return out;
}

}  // namespace

TEST_CASE("migrate: a new database runs every step once, in order, and ends at the last version") {
  Scratch s;
  auto db = open_db(s.db());
  REQUIRE(migrate(db, kThree));
  CHECK(user_version(db) == 3);
  CHECK(log_of(db) == std::vector<std::int64_t>{1, 2, 3});
  REQUIRE(migrate(db, kThree));  // and again, as every later start does: nothing runs
  auto reopened = open_db(s.db());
  REQUIRE(migrate(reopened, kThree));
  CHECK(log_of(reopened) == std::vector<std::int64_t>{1, 2, 3});
}

TEST_CASE("migrate: an older database runs only the steps it lacks") {
  Scratch s;
  auto db = open_db(s.db());
  REQUIRE(migrate(db, std::span(kThree, 1)));
  CHECK(user_version(db) == 1);
  CHECK(log_of(db) == std::vector<std::int64_t>{1});
  REQUIRE(migrate(db, kThree));
  CHECK(user_version(db) == 3);
  CHECK(log_of(db) == std::vector<std::int64_t>{1, 2, 3});
}

TEST_CASE("migrate: a failing step rolls back every step of the run and leaves user_version") {
  Scratch s;
  auto db = open_db(s.db());
  REQUIRE(migrate(db, std::span(kThree, 1)));
  const Migration broken[] = {
      kThree[0],
      {2, "CREATE TABLE half (x); INSERT INTO log VALUES (2);"},
      {3, "INSERT INTO nowhere VALUES (3);"},
  };
  auto r = migrate(db, broken);
  REQUIRE_FALSE(r);
  CHECK(r.error().code == Errc::io);
  CHECK(r.error().message == "test store: no such table: nowhere");
  CHECK(user_version(db) == 1);
  CHECK_FALSE(has_table(db, "half"));
  CHECK(log_of(db) == std::vector<std::int64_t>{1});
  // Nothing is left open: the fixed steps run on the same connection.
  REQUIRE(migrate(db, kThree));
  CHECK(log_of(db) == std::vector<std::int64_t>{1, 2, 3});
}

TEST_CASE("migrate: an up-to-date or newer database is only read, even while another process writes") {
  Scratch s;
  auto writer = open_db(s.db());
  REQUIRE(migrate(writer, kThree));
  auto reader = open_db(s.db(), 0);  // no busy timeout: a write attempt would fail at once
  Transaction held(writer);
  REQUIRE(held.begin());
  CHECK(migrate(reader, kThree));
  CHECK(migrate(reader, std::span(kThree, 2)));  // a database from a newer Kiln
  CHECK(user_version(reader) == 3);
}

TEST_CASE("migrate: a database another process migrated while this one waited for the lock is left alone") {
  Scratch s;
  auto first = open_db(s.db());
  auto second = open_db(s.db(), 30000);
  REQUIRE(migrate(first, std::span(kThree, 1)));
  // `first` is another kiln migrating to 3; `second` still reads version 1, then waits for the lock.
  Transaction other(first);
  REQUIRE(other.begin());
  REQUIRE(first.exec("INSERT INTO log VALUES (2); INSERT INTO log VALUES (3); PRAGMA user_version = 3;"));
  std::thread finisher([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    CHECK(other.commit());
  });
  auto r = migrate(second, kThree);
  finisher.join();
  REQUIRE(r);
  CHECK(log_of(second) == std::vector<std::int64_t>{1, 2, 3});  // steps 2 and 3 ran once, in `first`
}

TEST_CASE("migrate: steps out of order are a bug, refused before anything runs") {
  Scratch s;
  auto db = open_db(s.db());
  const Migration unordered[] = {{2, "CREATE TABLE b (x);"}, {1, "CREATE TABLE a (x);"}};
  auto r = migrate(db, unordered);
  REQUIRE_FALSE(r);
  CHECK(r.error().code == Errc::internal);
  CHECK(user_version(db) == 0);
  CHECK_FALSE(has_table(db, "a"));
  CHECK_FALSE(has_table(db, "b"));
}
