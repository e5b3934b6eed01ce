// Transaction: commit keeps the writes; every path that leaves without commit rolls them back.
#include <doctest/doctest.h>

#include "db/transaction.h"
#include "db_test_support.h"

using namespace kiln;
using namespace kiln::db;
using namespace kiln::db::test;

namespace {

std::int64_t rows(Database& db) {
  Statement s(db, "SELECT COUNT(*) FROM t");
  REQUIRE(s.next("count").value_or(false));
  return s.int64(0);
}

// A store operation that writes, then gives up before committing.
Result<void> insert_then_give_up(Database& db, bool give_up) {
  Transaction tx(db);
  if (auto r = tx.begin(); !r) return r;
  Statement ins(db, "INSERT INTO t VALUES (1)");
  if (auto r = ins.run("insert"); !r) return std::unexpected(r.error());
  if (give_up) return fail(Errc::conflict, "gave up");
  return tx.commit();
}

}  // namespace

TEST_CASE("transaction: an early return rolls back, a commit keeps the writes") {
  Scratch s;
  auto db = open_db(s.db());
  REQUIRE(db.exec("CREATE TABLE t (x INTEGER);"));
  CHECK_FALSE(insert_then_give_up(db, true));
  CHECK(rows(db) == 0);
  CHECK(insert_then_give_up(db, false));
  CHECK(rows(db) == 1);
  // The rollback ended the transaction: another one can begin on the same connection.
  Transaction next(db);
  CHECK(next.begin());
}

TEST_CASE("transaction: the writes are visible to another connection only after commit") {
  Scratch s;
  auto a = open_db(s.db());
  auto b = open_db(s.db());
  REQUIRE(a.exec("CREATE TABLE t (x INTEGER);"));
  Transaction tx(a);
  REQUIRE(tx.begin());
  Statement ins(a, "INSERT INTO t VALUES (1)");
  REQUIRE(ins.run("insert"));
  CHECK(rows(b) == 0);
  REQUIRE(tx.commit());
  CHECK(rows(b) == 1);
}

TEST_CASE("transaction: a commit that fails is an error and the destructor still rolls back") {
  Scratch s;
  auto db = open_db(s.db());
  REQUIRE(db.exec("CREATE TABLE p (id INTEGER PRIMARY KEY);"
                  "CREATE TABLE t (x INTEGER REFERENCES p(id) DEFERRABLE INITIALLY DEFERRED);"));
  {
    Transaction tx(db);
    REQUIRE(tx.begin());
    Statement ins(db, "INSERT INTO t VALUES (42)");  // a dangling reference, checked at commit
    REQUIRE(ins.run("insert"));
    auto r = tx.commit();
    REQUIRE_FALSE(r);
    CHECK(r.error().message.find("test store: commit failed: FOREIGN KEY constraint failed") == 0);
  }
  CHECK(rows(db) == 0);
  Transaction next(db);
  CHECK(next.begin());
}
