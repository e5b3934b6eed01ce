// Database::open: WAL mode, the file modes a store relies on, open errors, and how two connections
// to one file wait for each other's write lock (two kiln processes sharing a state directory).
#include <doctest/doctest.h>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

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

std::string journal_mode(Database& db) {
  Statement s(db, "PRAGMA journal_mode");
  auto row = s.next("journal_mode");
  REQUIRE(row);
  REQUIRE(*row);
  return s.text(0);
}

unsigned mode_of(const std::string& path) {
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  return st.st_mode & 0777;
}

}  // namespace

TEST_CASE("open: a new database is in WAL mode with foreign keys on, and stays in WAL when reopened") {
  Scratch s;
  {
    auto db = open_db(s.db());
    CHECK(journal_mode(db) == "wal");
    Statement fk(db, "PRAGMA foreign_keys");
    REQUIRE(fk.next("foreign_keys").value_or(false));
    CHECK(fk.int64(0) == 1);
    REQUIRE(db.exec("CREATE TABLE t (x INTEGER);"));
  }
  auto again = open_db(s.db());
  CHECK(journal_mode(again) == "wal");
  CHECK(has_table(again, "t"));
}

TEST_CASE("open: a private database and its WAL file are 0600 whatever the umask") {
  Scratch s;
  const mode_t old = ::umask(022);
  auto db = open_db(s.db());
  REQUIRE(db.exec("CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (1);"));
  ::umask(old);
  CHECK(mode_of(s.db()) == 0600);
  CHECK(mode_of(s.db() + "-wal") == 0600);
}

TEST_CASE("open: a database that is not private gets the umask's mode") {
  Scratch s;
  const mode_t old = ::umask(022);
  auto db = Database::open(s.db(), {.label = "test"});
  ::umask(old);
  REQUIRE(db);
  CHECK(mode_of(s.db()) == 0644);
}

TEST_CASE("open: a database that cannot be opened is an io error naming it") {
  Scratch s;
  const std::string path = s.dir + "/missing/folder/x.db";
  auto db = Database::open(path, {.label = "trace"});
  REQUIRE_FALSE(db);
  CHECK(db.error().code == Errc::io);
  CHECK(db.error().message.find("cannot open trace database " + path) == 0);
}

TEST_CASE("exec: a failing script is an io error in the store's words") {
  Scratch s;
  auto db = open_db(s.db());
  auto r = db.exec("CREATE TABLE t (x); CREATE TABLE t (x);");
  REQUIRE_FALSE(r);
  CHECK(r.error().code == Errc::io);
  CHECK(r.error().message == "test store: table t already exists");
}

TEST_CASE("busy: a writer waits in the busy timeout until the other connection's write ends") {
  Scratch s;
  auto a = open_db(s.db());
  auto b = open_db(s.db(), 30000);
  REQUIRE(a.exec("CREATE TABLE t (x INTEGER);"));
  Transaction held(a);
  REQUIRE(held.begin());
  Statement ins(a, "INSERT INTO t VALUES (1)");
  REQUIRE(ins.run("insert"));
  std::thread releaser([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    CHECK(held.commit());
  });
  Transaction waiting(b);
  auto begun = waiting.begin();  // blocks until `a` commits
  releaser.join();
  REQUIRE_MESSAGE(begun, (begun ? "" : begun.error().message));
  Statement count(b, "SELECT COUNT(*) FROM t");
  REQUIRE(count.next("count").value_or(false));
  CHECK(count.int64(0) == 1);  // b's transaction started after a's commit
}

TEST_CASE("busy: without a busy timeout a held write lock fails begin with an io error; later it succeeds") {
  Scratch s;
  auto a = open_db(s.db());
  auto b = open_db(s.db(), 0);
  {
    Transaction held(a);
    REQUIRE(held.begin());
    Transaction refused(b);
    auto r = refused.begin();
    REQUIRE_FALSE(r);
    CHECK(r.error().code == Errc::io);
    CHECK(r.error().message == "test store: begin failed: database is locked");
    // Readers never wait in WAL mode, even while the write lock is held.
    Statement read(b, "PRAGMA user_version");
    CHECK(read.next("read").value_or(false));
  }
  Transaction later(b);
  CHECK(later.begin());
}

TEST_CASE("open: the schema given is brought up to date, and a failing one fails the open") {
  Scratch s;
  static constexpr Migration kSchema[] = {{1, "CREATE TABLE t (x INTEGER);"}};
  auto db = Database::open(s.db(), {.label = "test", .schema = kSchema});
  REQUIRE(db);
  CHECK(user_version(*db) == 1);
  CHECK(has_table(*db, "t"));
  static constexpr Migration kBroken[] = {kSchema[0], {2, "CREATE TABLE t (x INTEGER);"}};
  auto again = Database::open(s.db(), {.label = "test", .schema = kBroken});
  REQUIRE_FALSE(again);
  CHECK(again.error().message == "test store: table t already exists");
}

TEST_CASE("open: processes making the same new database at once all get it (none is told it is locked)") {
  // Each round: four processes wait on one pipe, then open a fresh file together. Before turns were
  // taken (take_turn), one switch to WAL in about twenty failed with "database is locked".
  static constexpr Migration kSchema[] = {{1, "CREATE TABLE t (x INTEGER);"}};
  int failed = 0;
  for (int round = 0; round < 25; ++round) {
    Scratch s;
    int go[2];
    REQUIRE(::pipe(go) == 0);
    std::vector<pid_t> kids;
    for (int k = 0; k < 4; ++k) {
      pid_t pid = ::fork();
      REQUIRE(pid >= 0);
      if (pid == 0) {
        ::close(go[1]);
        char c;
        (void)!::read(go[0], &c, 1);  // returns 0 once the parent closes its end
        auto db = Database::open(s.db(), {.label = "test", .private_file = true, .schema = kSchema});
        ::_exit(db ? 0 : 1);  // no doctest macro in a child: it would go on running the tests
      }
      kids.push_back(pid);
    }
    ::close(go[0]);
    ::close(go[1]);
    for (pid_t pid : kids) {
      int status = 0;
      ::waitpid(pid, &status, 0);
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failed;
    }
  }
  CHECK(failed == 0);
}
