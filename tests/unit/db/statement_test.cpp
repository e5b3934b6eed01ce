// Statement: typed binds and columns round-trip, failures carry the store's words (a constraint is
// a conflict), reset rebinds, and a statement is finalized when it goes out of scope.
#include <doctest/doctest.h>

#include <filesystem>
#include <optional>
#include <vector>

#include "db_test_support.h"

using namespace kiln;
using namespace kiln::db;
using namespace kiln::db::test;

TEST_CASE("bind and column: text (NULs included), integers, bools, optionals and NULL round-trip") {
  Scratch s;
  auto db = open_db(s.db());
  REQUIRE(db.exec("CREATE TABLE t (a TEXT, b INTEGER, c INTEGER, d INTEGER, e TEXT, f INTEGER, g TEXT);"));
  Statement ins(db, "INSERT INTO t VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)");
  ins.bind(1, std::string("a\0b", 3));
  ins.bind(2, std::int64_t(-5));
  ins.bind(3, std::uint64_t(1) << 40);
  ins.bind(4, true);
  ins.bind(5, std::optional<std::string>());
  ins.bind(6, std::optional<int>(7));
  ins.bind(7, "plain");
  auto changed = ins.run("insert");
  REQUIRE(changed);
  CHECK(*changed == 1);

  Statement sel(db, "SELECT a, b, c, d, e, f, g FROM t");
  REQUIRE(sel.next("select").value_or(false));
  CHECK(sel.text(0) == std::string("a\0b", 3));
  CHECK(sel.int64(1) == -5);
  CHECK(sel.int64(2) == std::int64_t(1) << 40);
  CHECK(sel.int64(3) == 1);
  CHECK(sel.is_null(4));
  CHECK(sel.text(4).empty());
  CHECK(sel.opt_text(4) == std::nullopt);
  CHECK(sel.opt_int(5) == 7);
  CHECK(sel.opt_text(6) == "plain");
  auto more = sel.next("select");
  REQUIRE(more);
  CHECK_FALSE(*more);
}

TEST_CASE("each: visits every row in order; run: counts the rows a statement changed") {
  Scratch s;
  auto db = open_db(s.db());
  REQUIRE(db.exec("CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (3), (1), (2);"));
  Statement upd(db, "UPDATE t SET x = x * 10 WHERE x > ?1");
  upd.bind(1, 1);
  auto changed = upd.run("update");
  REQUIRE(changed);
  CHECK(*changed == 2);
  Statement sel(db, "SELECT x FROM t ORDER BY x");
  std::vector<std::int64_t> seen;
  REQUIRE(sel.each("select", [&] { seen.push_back(sel.int64(0)); }));
  CHECK(seen == std::vector<std::int64_t>{1, 20, 30});
}

TEST_CASE("a statement that does not prepare reports that from its first step, in the store's words") {
  Scratch s;
  auto db = open_db(s.db());
  Statement bad(db, "SELECT x FROM nope WHERE x = ?1");
  bad.bind(1, 1);  // harmless on a statement that did not prepare
  auto r = bad.next("select nope");
  REQUIRE_FALSE(r);
  CHECK(r.error().code == Errc::io);
  CHECK(r.error().message == "test store: select nope failed: no such table: nope");
  bad.reset();
  CHECK_FALSE(bad.run("again"));
}

TEST_CASE("a constraint violation is a conflict, other step failures are io") {
  Scratch s;
  auto db = open_db(s.db());
  REQUIRE(db.exec("CREATE TABLE t (id TEXT PRIMARY KEY); INSERT INTO t VALUES ('a');"));
  Statement dup(db, "INSERT INTO t VALUES (?1)");
  dup.bind(1, "a");
  auto r = dup.run("insert");
  REQUIRE_FALSE(r);
  CHECK(r.error().code == Errc::conflict);
  CHECK(r.error().message == "test store: insert failed: UNIQUE constraint failed: t.id");
  dup.reset();
  dup.bind(1, "b");
  CHECK(dup.run("insert").value_or(0) == 1);

  Statement bad(db, "SELECT abs(-9223372036854775807 - 1)");  // integer overflow: a runtime error
  auto e = bad.next("overflow");
  REQUIRE_FALSE(e);
  CHECK(e.error().code == Errc::io);
}

TEST_CASE("reset: the same statement runs again with new binds") {
  Scratch s;
  auto db = open_db(s.db());
  REQUIRE(db.exec("CREATE TABLE t (x INTEGER);"));
  Statement ins(db, "INSERT INTO t VALUES (?1)");
  for (int i = 1; i <= 3; ++i) {
    ins.reset();
    ins.bind(1, i);
    REQUIRE(ins.run("insert"));
  }
  Statement sum(db, "SELECT SUM(x) FROM t");
  REQUIRE(sum.next("sum").value_or(false));
  CHECK(sum.int64(0) == 6);
}

TEST_CASE("a statement is finalized when it goes out of scope, even in the middle of its rows") {
  Scratch s;
  auto db = open_db(s.db());
  REQUIRE(db.exec("CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (1), (2);"));
  {
    Statement sel(db, "SELECT x FROM t");
    REQUIRE(sel.next("select").value_or(false));
    // While it is mid-way, the table it reads cannot be dropped on this connection.
    auto blocked = db.exec("DROP TABLE t;");
    REQUIRE_FALSE(blocked);
    CHECK(blocked.error().message.find("locked") != std::string::npos);
  }
  CHECK(db.exec("DROP TABLE t;"));
}

TEST_CASE("a statement used again comes from the connection's cache unbound, at its first row, and alone") {
  Scratch s;
  auto db = open_db(s.db());
  REQUIRE(db.exec("CREATE TABLE t (x INTEGER, y TEXT); INSERT INTO t VALUES (1, 'a'), (2, 'b'), (3, 'c');"));
  const char* sql = "SELECT x FROM t WHERE ?1 IS NULL OR y = ?1 ORDER BY x";
  {
    Statement first(db, sql);
    first.bind(1, "b");
    REQUIRE(first.next("first").value_or(false));
    CHECK(first.int64(0) == 2);
  }  // given back mid-way, with a bind
  {
    Statement again(db, sql);  // no bind: ?1 must be NULL, not the earlier "b"
    std::vector<std::int64_t> xs;
    REQUIRE(again.each("again", [&] { xs.push_back(again.int64(0)); }));
    CHECK(xs == std::vector<std::int64_t>{1, 2, 3});
    // The same SQL twice at once: the second is its own statement.
    Statement other(db, sql);
    other.bind(1, "c");
    REQUIRE(other.next("other").value_or(false));
    CHECK(other.int64(0) == 3);
  }
  CHECK(db.exec("DROP TABLE t;"));  // nothing in the cache still reads the table
}

TEST_CASE("cached statements do not keep the connection from closing") {
  Scratch s;
  {
    auto db = open_db(s.db());
    REQUIRE(db.exec("CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (1);"));
    Statement sel(db, "SELECT x FROM t");
    REQUIRE(sel.next("select").value_or(false));
  }
  // The last connection to close a WAL database checkpoints it and removes the -wal file; a close
  // refused for unfinalized statements would leave it behind.
  CHECK_FALSE(std::filesystem::exists(s.db() + "-wal"));
}
