// The trace store: records round-trip, list filters and keyset paging, orphaned runs, two
// processes on one state directory, and restarts.
#include <doctest/doctest.h>

#include <sqlite3.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "trace_test_support.h"
#include "traces/trace_store.h"
#include "traces/trace_util.h"

using namespace kiln::traces;
using namespace kiln::traces::testing;
using nlohmann::json;

namespace {

// Rewrites who owns a record, as if another (possibly dead) process had started it.
void set_owner(const std::string& dir, const std::string& id, int64_t pid, int64_t start, const std::string& boot,
               const std::string& pid_ns = detail::self_identity().pid_ns) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open((dir + "/traces.db").c_str(), &db) == SQLITE_OK);
  sqlite3_busy_timeout(db, 5000);
  std::string sql = fmt::format("UPDATE traces SET owner_pid = {}, owner_start = {}, owner_boot = '{}', owner_pidns = '{}'"
                                " WHERE id = '{}'", pid, start, boot, pid_ns, id);
  CHECK(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr) == SQLITE_OK);
  sqlite3_close(db);
}

}  // namespace

TEST_CASE("the helpers: ISO 8601 times, ids and cursors") {
  using namespace kiln::traces::detail;
  CHECK(parse_iso8601_ms("1970-01-01T00:00:01.5Z") == 1500);
  CHECK(parse_iso8601_ms("1970-01-02") == 86400000);
  CHECK(parse_iso8601_ms("1970-01-01T01:00:00+01:00") == 0);
  CHECK(parse_iso8601_ms("1970-01-01T00:00") == 0);
  CHECK_FALSE(parse_iso8601_ms("yesterday"));
  CHECK_FALSE(parse_iso8601_ms("2026-13-01"));
  CHECK_FALSE(parse_iso8601_ms("2026-01-01T10:00:00Zjunk"));
  CHECK(format_iso8601_ms(1500) == "1970-01-01T00:00:01.500Z");
  CHECK(parse_iso8601_ms(now_iso8601()).has_value());
  CHECK(valid_trace_id(random_trace_id()));
  CHECK_FALSE(valid_trace_id("tr_../../etc/passwd"));
  Cursor c{"2026-01-01T00:00:00.000Z", "tr_0123456789abcdef", 0xdeadbeef};
  auto back = decode_cursor(encode_cursor(c));
  REQUIRE(back);
  CHECK(back->started_at == c.started_at);
  CHECK(back->id == c.id);
  CHECK(back->filter_hash == c.filter_hash);
  CHECK_FALSE(decode_cursor("not a cursor"));
  CHECK_FALSE(decode_cursor(""));
  CHECK(self_identity().start_time == process_start_time(::getpid()));
  CHECK(self_identity().pid_ns.starts_with("pid:["));
}

TEST_CASE("a fresh state directory: traces.db private, in WAL mode") {
  TempDir t;
  std::string dir = t.path + "/state";
  auto store = open_store(dir);
  CHECK(store->dir() == dir);
  struct stat st {};
  REQUIRE(::stat((dir + "/traces.db").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  REQUIRE(::stat(dir.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0700);
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open((dir + "/traces.db").c_str(), &db) == SQLITE_OK);
  sqlite3_stmt* q = nullptr;
  sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &q, nullptr);
  REQUIRE(sqlite3_step(q) == SQLITE_ROW);
  CHECK(std::string(reinterpret_cast<const char*>(sqlite3_column_text(q, 0))) == "wal");
  sqlite3_finalize(q);
  sqlite3_close(db);
  // The run's own folder is made by the runner with the first byte of output, not here.
  auto id = start(*store).id;
  auto out = store->output_dir(id);
  REQUIRE(out);
  CHECK(*out == dir + "/traces/" + id);
  CHECK(::stat(out->c_str(), &st) != 0);
  REQUIRE(::stat((dir + "/traces").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0700);
  CHECK_FALSE(store->output_dir("../escape"));
}

TEST_CASE("every field round-trips through start, finish, get and a reopen") {
  TempDir t;
  std::string id, parent_id;
  {
    auto s = open_store(t.path);
    parent_id = start(*s, "verify").id;
    TraceStart st;
    st.kind = "exec";
    st.workspace_id = "ws_a";
    st.parent_id = parent_id;
    st.name = "test";
    st.client = {{"name", "claude-code"}, {"version", "1.2.3"}};
    st.command = "make check \xff";  // bytes that are not UTF-8 survive in text columns
    st.cwd = "/src/app";
    st.policy = {{"network", "none"}, {"limits", {{"wall_s", 600}}}, {"secret_names", {"NPM_TOKEN"}}};
    st.result = {{"progress", 0}};
    auto rec = s->start(st);
    REQUIRE(rec);
    id = rec->id;
    CHECK(detail::valid_trace_id(id));
    CHECK(rec->status == "running");
    CHECK(s->update_result(id, {{"progress", 1}}));
    TraceFinish f;
    f.status = "fail";
    f.exit_code = 2;
    f.signal = 9;
    f.stop_reason = "exit";
    f.resources = {{"peak_memory_bytes", 1 << 20}, {"peak_memory_source", "cgroup"}, {"user_ms", 5}, {"sys_ms", 1}};
    f.output = {{"stdout_bytes", 10}, {"stderr_bytes", 0}, {"dropped_bytes", 0}, {"truncated", false}};
    f.cleanup = {{"ok", true}};
    f.tests = {{"passed", 3}, {"failed", 1}, {"message", "bad \xc3"}};
    f.error = "one test failed";
    f.duration_ms = 1234;
    REQUIRE(s->finish(id, f));
    auto again = s->finish(id, f);
    REQUIRE_FALSE(again);
    CHECK(again.error().code == kiln::Errc::conflict);
    CHECK(s->update_result(id, json::object()).error().code == kiln::Errc::conflict);
  }
  auto s = open_store(t.path);
  auto got = s->get(id);
  REQUIRE(got);
  REQUIRE(got->has_value());
  const TraceRecord& r = **got;
  CHECK(r.kind == "exec");
  CHECK(r.workspace_id == "ws_a");
  CHECK(r.parent_id == parent_id);
  CHECK(r.name == "test");
  CHECK(r.client["name"] == "claude-code");
  CHECK(r.command == "make check \xff");
  CHECK(r.cwd == "/src/app");
  CHECK(r.policy["limits"]["wall_s"] == 600);
  CHECK(r.status == "fail");
  CHECK(detail::parse_iso8601_ms(r.started_at));
  REQUIRE(r.ended_at);
  CHECK(*r.ended_at >= r.started_at);
  CHECK(r.duration_ms == 1234);
  CHECK(r.exit_code == 2);
  CHECK(r.signal == 9);
  CHECK(r.stop_reason == "exit");
  CHECK(r.resources["peak_memory_source"] == "cgroup");
  CHECK(r.output["stdout_bytes"] == 10);
  CHECK(r.cleanup["ok"] == true);
  CHECK(r.tests["failed"] == 1);
  CHECK(r.tests["message"] == "bad \xef\xbf\xbd");  // the invalid byte became U+FFFD, the record survived
  CHECK(r.result["progress"] == 1);  // finish with a null result keeps update_result's
  CHECK(r.error == "one test failed");
  json j = to_json(r);
  CHECK(j["id"] == id);
  CHECK(j["parent_id"] == parent_id);
  CHECK(j["exit_code"] == 2);
  CHECK(j.size() == 25);  // principal and changes included (null: not recorded)
  // The parent is still running: this process owns it, so reopening left it alone.
  auto parent = s->get(parent_id);
  REQUIRE(parent);
  json pj = to_json(**parent);
  CHECK(pj["status"] == "running");
  CHECK(pj["ended_at"].is_null());
  CHECK(pj["exit_code"].is_null());
  CHECK(pj["parent_id"].is_null());
  CHECK(pj["tests"].is_null());
}

TEST_CASE("start and finish refuse what they cannot record") {
  TempDir t;
  auto s = open_store(t.path);
  TraceStart st;
  st.kind = "build";
  CHECK(s->start(st).error().code == kiln::Errc::invalid_argument);
  st.kind = "exec";
  st.parent_id = "tr_0000000000000000";
  CHECK(s->start(st).error().code == kiln::Errc::not_found);
  st.parent_id.reset();
  st.started_at = "soon";
  CHECK(s->start(st).error().code == kiln::Errc::invalid_argument);
  auto id = start(*s).id;
  TraceFinish f;
  f.status = "running";
  CHECK(s->finish(id, f).error().code == kiln::Errc::invalid_argument);
  f.status = "pass";
  CHECK(s->finish("tr_0000000000000000", f).error().code == kiln::Errc::not_found);
  CHECK(s->update_result("tr_0000000000000000", json::object()).error().code == kiln::Errc::not_found);
  auto none = s->get("../../etc");
  REQUIRE(none);
  CHECK_FALSE(none->has_value());
}

TEST_CASE("finish records a run's changes in the same update; without them, set_changes' stay") {
  TempDir t;
  auto s = open_store(t.path);
  auto a = start(*s);
  TraceFinish f;
  f.status = "pass";
  f.duration_ms = 3;
  f.changes = json{{"added", 1}, {"paths", json::array({"new.txt"})}};
  REQUIRE(s->finish(a.id, f));
  auto got = s->get(a.id);
  REQUIRE(got);
  REQUIRE(got->has_value());
  CHECK((*got)->changes["paths"] == json::array({"new.txt"}));
  CHECK((*got)->duration_ms == 3);

  auto b = start(*s);
  REQUIRE(s->set_changes(b.id, json{{"error", "no checkpoint"}}));
  TraceFinish g;
  g.status = "fail";  // no duration: taken from the timestamps
  REQUIRE(s->finish(b.id, g));
  got = s->get(b.id);
  REQUIRE(got);
  CHECK((*got)->changes["error"] == "no checkpoint");
  CHECK((*got)->status == "fail");
  CHECK((*got)->duration_ms.has_value());
  // Ending it again says it has ended, and how.
  auto again = s->finish(b.id, g);
  REQUIRE_FALSE(again);
  CHECK(again.error().code == kiln::Errc::conflict);
  CHECK(again.error().message.find("(fail)") != std::string::npos);
}

TEST_CASE("list filters by workspace, kind, status, parent, roots and time; count totals") {
  TempDir t;
  auto s = open_store(t.path);
  auto v = start(*s, "verify", "ws_a", "2026-01-01T10:00:00Z");
  auto step1 = start(*s, "exec", "ws_a", "2026-01-01T10:00:01Z", v.id);
  auto step2 = start(*s, "exec", "ws_a", "2026-01-01T10:00:02Z", v.id);
  auto e1 = start(*s, "exec", "ws_a", "2026-01-02T00:00:00Z");
  auto e2 = start(*s, "exec", "ws_b", "2026-01-03T00:00:00Z");
  auto p = start(*s, "publish", "ws_b", "2026-01-04T00:00:00Z");
  finish(*s, step1.id, "pass");
  finish(*s, step2.id, "fail");
  finish(*s, v.id, "fail");
  finish(*s, e1.id, "pass");
  auto ids = [&](TraceQuery q) {
    auto page = s->list(q);
    REQUIRE_MESSAGE(page.has_value(), (page ? "" : page.error().message));
    std::vector<std::string> out;
    for (auto& r : page->records) out.push_back(r.id);
    return out;
  };
  using V = std::vector<std::string>;
  CHECK(ids({}) == V{p.id, e2.id, e1.id, step2.id, step1.id, v.id});
  CHECK(ids({.workspace_id = "ws_b"}) == V{p.id, e2.id});
  CHECK(ids({.kind = "verify"}) == V{v.id});
  CHECK(ids({.status = "running"}) == V{p.id, e2.id});
  CHECK(ids({.parent_id = v.id}) == V{step2.id, step1.id});
  CHECK(ids({.workspace_id = "ws_a", .roots_only = true}) == V{e1.id, v.id});
  CHECK(ids({.since = "2026-01-02"}) == V{p.id, e2.id, e1.id});
  CHECK(ids({.since = "2026-01-03T01:00:00+01:00"}) == V{p.id, e2.id});
  CHECK(ids({.workspace_id = "ws_a", .kind = "exec", .status = "pass"}).size() == 2);
  CHECK(ids({.limit = 0}).size() == 1);
  CHECK(ids({.limit = 100000}).size() == 6);
  CHECK(s->list({.kind = "shell"}).error().code == kiln::Errc::invalid_argument);
  CHECK(s->list({.status = "ok"}).error().code == kiln::Errc::invalid_argument);
  CHECK(s->list({.since = "last week"}).error().code == kiln::Errc::invalid_argument);

  auto ca = s->count("ws_a", {});
  REQUIRE(ca);
  CHECK(ca->total == 2);  // the verify's steps are inside the verify
  CHECK(ca->fail == 1);
  CHECK(ca->pass == 1);
  auto all = s->count("", {});
  REQUIRE(all);
  CHECK(all->total == 4);
  CHECK(all->running == 2);
  CHECK(to_json(*all)["running"] == 2);
}

TEST_CASE("paging 120 records with a cursor while new ones arrive: newest first, none lost or repeated") {
  TempDir t;
  auto s = open_store(t.path);
  std::vector<std::string> originals;  // in start order; three share each second, so ids break ties
  for (int i = 0; i < 120; ++i)
    originals.push_back(start(*s, "exec", "ws", detail::format_iso8601_ms(1767225600000 + (i / 3) * 1000)).id);
  std::vector<TraceRecord> seen;
  std::string cursor;
  int pages = 0;
  do {
    auto page = s->list({.workspace_id = "ws", .limit = 25, .cursor = cursor});
    REQUIRE_MESSAGE(page.has_value(), (page ? "" : page.error().message));
    for (auto& r : page->records) seen.push_back(r);
    cursor = page->next_cursor;
    start(*s, "exec", "ws");  // new work started between pages
    start(*s, "exec", "ws", detail::format_iso8601_ms(1767225600000 + 20000));  // even amid the old ones
    ++pages;
  } while (!cursor.empty() && pages < 20);
  CHECK(pages >= 5);  // the records started amid the old ones may add a page
  CHECK(pages < 20);
  std::set<std::string> unique;
  for (auto& r : seen) CHECK_MESSAGE(unique.insert(r.id).second, "repeated ", r.id);
  for (auto& id : originals) CHECK_MESSAGE(unique.count(id) == 1, "missed ", id);
  for (size_t i = 1; i < seen.size(); ++i) {
    bool ordered = std::tie(seen[i - 1].started_at, seen[i - 1].id) > std::tie(seen[i].started_at, seen[i].id);
    CHECK(ordered);
  }
}

TEST_CASE("a cursor that is not ours, or from other filters, is refused") {
  TempDir t;
  auto s = open_store(t.path);
  for (int i = 0; i < 3; ++i) start(*s);
  auto first = s->list({.workspace_id = "ws_1", .limit = 1});
  REQUIRE(first);
  REQUIRE_FALSE(first->next_cursor.empty());
  CHECK(s->list({.workspace_id = "ws_1", .limit = 1, .cursor = first->next_cursor}));
  for (const std::string& bad : std::vector<std::string>{"garbage!", "Zm9vYmFy", first->next_cursor + "A", first->next_cursor.substr(1)}) {
    auto r = s->list({.workspace_id = "ws_1", .cursor = bad});
    REQUIRE_FALSE(r);
    CHECK(r.error().code == kiln::Errc::invalid_argument);
    CHECK(r.error().message == "cursor is not one this server returned; call trace_list without cursor");
  }
  auto other = s->list({.kind = "exec", .cursor = first->next_cursor});
  REQUIRE_FALSE(other);
  CHECK(other.error().code == kiln::Errc::invalid_argument);
}

TEST_CASE("running records of processes that are gone become interrupted; live owners keep theirs") {
  TempDir t;
  auto s = open_store(t.path);
  const auto& self = detail::self_identity();
  auto dead_pid = start(*s, "exec", "ws", "2026-01-01T00:00:00Z");
  auto other_boot = start(*s);
  auto reused_pid = start(*s);
  auto live_other = start(*s);
  auto mine = start(*s);
  auto ended = start(*s);
  finish(*s, ended.id, "pass");
  set_owner(t.path, dead_pid.id, 2147480000, 1, self.boot_id);
  set_owner(t.path, other_boot.id, self.pid, self.start_time, "00000000-0000-0000-0000-000000000000");
  set_owner(t.path, reused_pid.id, self.pid, self.start_time + 12345, self.boot_id);
  auto init_start = detail::process_start_time(1);
  if (init_start) set_owner(t.path, live_other.id, 1, *init_start, self.boot_id);
  set_owner(t.path, ended.id, 2147480000, 1, self.boot_id);

  auto n = s->mark_orphans_interrupted();
  REQUIRE(n);
  CHECK(*n == 3);
  for (auto* id : {&dead_pid.id, &other_boot.id, &reused_pid.id}) {
    auto r = s->get(*id);
    REQUIRE(r);
    CHECK((*r)->status == "interrupted");
    CHECK((*r)->stop_reason == "interrupted");
    CHECK((*r)->ended_at.has_value());
  }
  CHECK((*s->get(dead_pid.id))->duration_ms > int64_t(86400000));  // started at a fixed past time
  CHECK(status_of(*s, live_other.id) == "running");
  CHECK(status_of(*s, mine.id) == "running");
  CHECK(status_of(*s, ended.id) == "pass");
  CHECK(*s->mark_orphans_interrupted() == 0);

  // A pid from another pid namespace (another container on the same state dir) cannot be judged.
  auto foreign = start(*s);
  set_owner(t.path, foreign.id, 2147480000, 1, self.boot_id, "pid:[1]");
  CHECK(*s->mark_orphans_interrupted() == 0);
  CHECK(status_of(*s, foreign.id) == "running");

  // Opening the store does the same for records orphaned since.
  set_owner(t.path, mine.id, 2147480001, 1, self.boot_id);
  auto s2 = open_store(t.path);
  CHECK(status_of(*s2, mine.id) == "interrupted");
  CHECK(status_of(*s2, live_other.id) == "running");
}

TEST_CASE("two stores on one directory, as two kiln processes, see and finish each other's records") {
  TempDir t;
  auto a = open_store(t.path);
  auto b = open_store(t.path);
  auto rec = start(*a);
  CHECK(status_of(*b, rec.id) == "running");
  finish(*b, rec.id, "pass");
  CHECK(status_of(*a, rec.id) == "pass");
  auto writer = [](TraceStore* s, const std::string& ws) {
    for (int i = 0; i < 40; ++i) {
      TraceStart st;
      st.kind = "exec";
      st.workspace_id = ws;
      auto r = s->start(st);
      REQUIRE(r);
      TraceFinish f;
      f.status = "pass";
      REQUIRE(s->finish(r->id, f));
    }
  };
  std::thread ta(writer, a.get(), "ws_a"), tb(writer, b.get(), "ws_b");
  ta.join();
  tb.join();
  CHECK(a->count("ws_b", {})->pass == 40);
  CHECK(b->count("ws_a", {})->pass == 40);
  CHECK(a->list({.limit = 500})->records.size() == 81);
}

TEST_CASE("principals: recorded per trace, filtered in lists and counts; a version 1 database keeps its rows") {
  TempDir dir;
  {
    // A store as it was before principals: schema version 1, one finished record.
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open((dir.path + "/traces.db").c_str(), &db) == SQLITE_OK);
    const char* v1 =
        "CREATE TABLE traces (id TEXT PRIMARY KEY, kind TEXT NOT NULL, workspace_id TEXT NOT NULL, parent_id TEXT,"
        " name TEXT NOT NULL DEFAULT '', client TEXT, command TEXT NOT NULL DEFAULT '', cwd TEXT NOT NULL DEFAULT '',"
        " policy TEXT, status TEXT NOT NULL, started_at TEXT NOT NULL, ended_at TEXT, duration_ms INTEGER,"
        " exit_code INTEGER, signal INTEGER, stop_reason TEXT NOT NULL DEFAULT '', resources TEXT, output TEXT,"
        " cleanup TEXT, tests TEXT, result TEXT, error TEXT NOT NULL DEFAULT '', owner_pid INTEGER,"
        " owner_start INTEGER, owner_boot TEXT, owner_pidns TEXT);"
        "INSERT INTO traces(id, kind, workspace_id, command, status, started_at, ended_at)"
        " VALUES ('tr_00000000000000aa', 'exec', 'ws_1', 'old make', 'pass', '2026-01-01T00:00:00.000Z',"
        " '2026-01-01T00:00:01.000Z');"
        "PRAGMA user_version = 1;";
    REQUIRE(sqlite3_exec(db, v1, nullptr, nullptr, nullptr) == SQLITE_OK);
    sqlite3_close(db);
  }
  auto s = open_store(dir.path);
  auto old = s->get("tr_00000000000000aa");
  REQUIRE(old);
  REQUIRE(old->has_value());
  CHECK((*old)->command == "old make");
  CHECK((*old)->principal.empty());
  CHECK(to_json(**old)["principal"].is_null());

  for (const char* who : {"alice", "bob"}) {
    TraceStart st;
    st.kind = "exec";
    st.workspace_id = "ws_1";
    st.command = std::string("make for ") + who;
    st.principal = who;
    auto rec = s->start(st);
    REQUIRE(rec);
    CHECK(rec->principal == who);
    auto back = s->get(rec->id);
    REQUIRE(back);
    CHECK((**back).principal == who);
    CHECK(to_json(**back)["principal"] == who);
  }
  auto names = [&](PrincipalFilter who) {
    TraceQuery q;
    q.who = who;
    auto page = s->list(q);
    REQUIRE(page);
    std::set<std::string> out;
    for (const auto& r : page->records) out.insert(r.command);
    return out;
  };
  CHECK(names({"alice", false}) == std::set<std::string>{"make for alice"});
  CHECK(names({"bob", true}) == std::set<std::string>{"make for bob", "old make"});
  CHECK(names({}).size() == 3);
  CHECK(s->count("ws_1", {"alice", false})->total == 1);
  CHECK(s->count("ws_1", {"alice", true})->total == 2);
  CHECK(s->count("", {})->total == 3);
  // A cursor of one principal's listing is refused under another's.
  for (int i = 0; i < 3; ++i) {
    TraceStart st;
    st.kind = "exec";
    st.workspace_id = "ws_1";
    st.principal = "alice";
    REQUIRE(s->start(st));
  }
  TraceQuery qa;
  qa.who = {"alice", false};
  qa.limit = 1;
  auto first = s->list(qa);
  REQUIRE(first);
  REQUIRE_FALSE(first->next_cursor.empty());
  TraceQuery qb;
  qb.who = {"bob", false};
  qb.cursor = first->next_cursor;
  CHECK_FALSE(s->list(qb).has_value());
}

TEST_CASE("an end announced with expect_finish holds reads of the record, lists and counts until it is written") {
  TempDir t;
  auto s = open_store(t.path);
  auto a = start(*s);
  auto other = start(*s);
  s->expect_finish(a.id, "");
  // Written a moment later on another thread, as RunTracer does after its caller has the result.
  std::jthread writer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    TraceFinish f;
    f.status = "pass";
    f.exit_code = 0;
    REQUIRE(s->finish(a.id, f));
  });
  auto got = s->get(a.id);
  REQUIRE(got);
  REQUIRE(got->has_value());
  CHECK((*got)->status == "pass");
  TraceQuery q;
  auto page = s->list(q);
  REQUIRE(page);
  for (const auto& r : page->records)
    if (r.id == a.id) CHECK(r.status == "pass");
  writer.join();
  // A record with nothing announced is read at once, and an end that fails still releases.
  auto running = s->get(other.id);
  REQUIRE(running);
  CHECK((*running)->status == "running");
  s->expect_finish(other.id, "");
  TraceFinish bad;
  bad.status = "running";
  CHECK_FALSE(s->finish(other.id, bad));
  s->wait_finishes();
  CHECK(s->get(other.id));
}

TEST_CASE("wait_finishes waits for the ends of its principal announced before it, not for later ones") {
  TempDir t;
  auto s = open_store(t.path);
  auto a = start(*s);
  auto b = start(*s);
  s->expect_finish(a.id, "alice");
  s->wait_finishes(std::make_unique<std::string>("bob").get());  // another principal's: returns at once
  std::atomic<bool> written{false};
  std::jthread writer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    s->expect_finish(b.id, "alice");  // announced while the wait below runs: not waited for
    TraceFinish f;
    f.status = "pass";
    written = true;
    REQUIRE(s->finish(a.id, f));
  });
  const std::string alice = "alice";
  s->wait_finishes(&alice);
  CHECK(written);
  auto got = s->get(a.id);
  REQUIRE(got);
  CHECK((*got)->status == "pass");
  writer.join();
  s->forget_finish(b.id);
  s->wait_finishes();
}

TEST_CASE("wait_finishes_for: true once every announced end is written, false if one never comes") {
  TempDir t;
  auto s = open_store(t.path);
  auto a = start(*s);
  auto b = start(*s);
  CHECK(s->wait_finishes_for(std::chrono::milliseconds(0)));  // nothing announced
  s->expect_finish(a.id, "alice");
  s->expect_finish(b.id, "bob");
  std::jthread writer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    TraceFinish f;
    f.status = "pass";
    CHECK(s->finish(a.id, f));  // CHECK: a REQUIRE throwing on this thread would end the process
    CHECK(s->finish(b.id, f));
  });
  CHECK(s->wait_finishes_for(std::chrono::minutes(1)));  // every principal's, not only one
  auto got = s->get(b.id);
  REQUIRE(got);
  CHECK((*got)->status == "pass");
  writer.join();
  auto c = start(*s);
  s->expect_finish(c.id, "");
  CHECK_FALSE(s->wait_finishes_for(std::chrono::milliseconds(20)));  // its writer never comes
  s->forget_finish(c.id);
  CHECK(s->wait_finishes_for(std::chrono::milliseconds(0)));
}
