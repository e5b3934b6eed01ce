// SQLite side of the trace store: its own traces.db beside kiln.db, WAL plus a busy timeout so
// every kiln process sharing the state directory can write records through its own connection.
#include "traces/trace_store.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fmt/format.h>

#include "db/migrate.h"
#include "db/statement.h"
#include "db/transaction.h"
#include "traces/trace_util.h"

namespace kiln::traces {

namespace {

void bind_json(db::Statement& st, int i, const nlohmann::json& j) {
  if (j.is_null()) return st.bind_null(i);
  try {
    // Invalid UTF-8 in a command line or a test message must not lose the whole record.
    st.bind(i, j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  } catch (const nlohmann::json::exception&) {
    st.bind_null(i);
  }
}

nlohmann::json column_json(const db::Statement& st, int col) {
  if (st.is_null(col)) return nullptr;
  auto j = nlohmann::json::parse(st.text(col), nullptr, /*allow_exceptions=*/false);
  return j.is_discarded() ? nlohmann::json() : j;
}

constexpr const char* kColumns =
    "SELECT id, kind, workspace_id, parent_id, name, client, command, cwd, policy, status, started_at, ended_at,"
    " duration_ms, exit_code, signal, stop_reason, resources, output, cleanup, tests, result, error,"
    " COALESCE(principal, ''), network_log, changes FROM traces ";

TraceRecord row_to_record(const db::Statement& s) {
  TraceRecord r;
  r.id = s.text(0);
  r.kind = s.text(1);
  r.workspace_id = s.text(2);
  r.parent_id = s.opt_text(3);
  r.name = s.text(4);
  r.client = column_json(s, 5);
  r.command = s.text(6);
  r.cwd = s.text(7);
  r.policy = column_json(s, 8);
  r.status = s.text(9);
  r.started_at = s.text(10);
  r.ended_at = s.opt_text(11);
  r.duration_ms = s.opt_int(12);
  if (auto v = s.opt_int(13)) r.exit_code = int(*v);
  if (auto v = s.opt_int(14)) r.signal = int(*v);
  r.stop_reason = s.text(15);
  r.resources = column_json(s, 16);
  r.output = column_json(s, 17);
  r.cleanup = column_json(s, 18);
  r.tests = column_json(s, 19);
  r.result = column_json(s, 20);
  r.error = s.text(21);
  r.principal = s.text(22);
  r.network_log = column_json(s, 23);
  r.changes = column_json(s, 24);
  return r;
}

bool one_of(const std::string& v, std::initializer_list<const char*> allowed) {
  return std::any_of(allowed.begin(), allowed.end(), [&](const char* a) { return v == a; });
}

constexpr std::initializer_list<const char*> kKinds = {"exec", "verify", "publish", "service", "app", "schedule"};
constexpr std::initializer_list<const char*> kStatuses = {"running", "pass", "fail", "error", "interrupted"};

int64_t duration_between(const std::string& start, const std::string& end) {
  auto a = detail::parse_iso8601_ms(start), b = detail::parse_iso8601_ms(end);
  return a && b ? std::max<int64_t>(0, *b - *a) : 0;
}

Error not_found(const std::string& id) {
  return Error{Errc::not_found, fmt::format("no trace {}; trace_list shows the traces there are", id)};
}

}  // namespace

Result<std::unique_ptr<TraceStore>> TraceStore::open(const std::string& state_dir) {
  auto store = unopened(state_dir);
  if (auto r = store->open_database(); !r) return std::unexpected(r.error());
  return store;
}

std::unique_ptr<TraceStore> TraceStore::unopened(const std::string& state_dir) {
  return std::unique_ptr<TraceStore>(new TraceStore(state_dir));
}

Result<void> TraceStore::open_database() {
  const std::string& state_dir = dir_;
  std::error_code ec;
  std::filesystem::create_directories(state_dir + "/traces", ec);
  if (ec) {
    return fail(Errc::io, fmt::format("cannot create state directory {}: {}; set KILN_HOME to a writable folder",
                                      state_dir, ec.message()));
  }
  // Commands, cwd and output of every run live here: for the user's eyes only.
  ::chmod(state_dir.c_str(), 0700);
  ::chmod((state_dir + "/traces").c_str(), 0700);
  static constexpr db::Migration kSchema[] = {
      {1,
       "CREATE TABLE IF NOT EXISTS traces ("
       "  id TEXT PRIMARY KEY, kind TEXT NOT NULL, workspace_id TEXT NOT NULL, parent_id TEXT,"
       "  name TEXT NOT NULL DEFAULT '', client TEXT, command TEXT NOT NULL DEFAULT '',"
       "  cwd TEXT NOT NULL DEFAULT '', policy TEXT, status TEXT NOT NULL, started_at TEXT NOT NULL,"
       "  ended_at TEXT, duration_ms INTEGER, exit_code INTEGER, signal INTEGER,"
       "  stop_reason TEXT NOT NULL DEFAULT '', resources TEXT, output TEXT, cleanup TEXT, tests TEXT,"
       "  result TEXT, error TEXT NOT NULL DEFAULT '',"
       "  owner_pid INTEGER, owner_start INTEGER, owner_boot TEXT, owner_pidns TEXT);"
       "CREATE INDEX IF NOT EXISTS traces_by_time ON traces(started_at, id);"
       "CREATE INDEX IF NOT EXISTS traces_by_workspace ON traces(workspace_id, started_at, id);"
       "CREATE INDEX IF NOT EXISTS traces_by_parent ON traces(parent_id);"
       "CREATE INDEX IF NOT EXISTS traces_running ON traces(status) WHERE status = 'running';"},
      // The principal a run was for. Older rows keep NULL: they were all the local user's.
      {2, "ALTER TABLE traces ADD COLUMN principal TEXT;"},
      // The egress proxy's decisions for a run with a network allowlist (NULL for every other run).
      {3, "ALTER TABLE traces ADD COLUMN network_log TEXT;"},
      // Version 4: what a run changed in the workspace (checkpoints around it).
      {4, "ALTER TABLE traces ADD COLUMN changes TEXT;"},
  };
  auto db = db::Database::open(state_dir + "/traces.db",
                               {.label = "trace", .busy_timeout_ms = 5000, .private_file = true, .schema = kSchema});
  if (!db) return std::unexpected(db.error());
  {
    std::lock_guard lock(mu_);
    db_ = std::move(*db);
  }
  if (auto r = mark_orphans_interrupted(); !r) return std::unexpected(r.error());
  return {};
}

std::string TraceStore::clean(std::string_view s) const { return scrub_ ? scrub_(s) : std::string(s); }

nlohmann::json TraceStore::clean_json(const nlohmann::json& j) const {
  if (!scrub_) return j;
  if (j.is_string()) return clean(j.get_ref<const std::string&>());
  if (j.is_array()) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& v : j) out.push_back(clean_json(v));
    return out;
  }
  if (j.is_object()) {
    nlohmann::json out = nlohmann::json::object();
    for (const auto& [k, v] : j.items()) out[clean(k)] = clean_json(v);
    return out;
  }
  return j;
}

Result<TraceRecord> TraceStore::prepare_start(const TraceStart& s) const {
  if (!one_of(s.kind, kKinds))
    return fail(Errc::invalid_argument, fmt::format("trace kind '{}' is not exec, verify, publish or service", s.kind));
  TraceRecord r;
  r.started_at = now_iso8601();
  if (!s.started_at.empty()) {
    auto ms = detail::parse_iso8601_ms(s.started_at);
    if (!ms) return fail(Errc::invalid_argument, fmt::format("started_at '{}' is not an ISO 8601 time", s.started_at));
    r.started_at = detail::format_iso8601_ms(*ms);
  }
  r.kind = s.kind;
  r.workspace_id = s.workspace_id;
  r.parent_id = s.parent_id;
  r.name = clean(s.name);
  r.client = clean_json(s.client);
  r.principal = clean(s.principal);
  r.command = clean(s.command);
  r.cwd = clean(s.cwd);
  r.policy = clean_json(s.policy);
  r.result = clean_json(s.result);
  r.status = "running";
  r.id = detail::random_trace_id();
  return r;
}

Result<void> TraceStore::insert_locked(const TraceRecord& r) {
  const auto& self = detail::self_identity();
  db::Statement ins(db_,
                    "INSERT INTO traces(id, kind, workspace_id, parent_id, name, client, command, cwd, policy,"
                    " status, started_at, result, owner_pid, owner_start, owner_boot, owner_pidns, principal)"
                    " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, 'running', ?10, ?11, ?12, ?13, ?14, ?15, ?16)");
  ins.bind(1, r.id);
  ins.bind(2, r.kind);
  ins.bind(3, r.workspace_id);
  ins.bind(4, r.parent_id);
  ins.bind(5, r.name);
  bind_json(ins, 6, r.client);
  ins.bind(7, r.command);
  ins.bind(8, r.cwd);
  bind_json(ins, 9, r.policy);
  ins.bind(10, r.started_at);
  bind_json(ins, 11, r.result);
  ins.bind(12, self.pid);
  ins.bind(13, self.start_time);
  ins.bind(14, self.boot_id);
  ins.bind(15, self.pid_ns);
  if (r.principal.empty()) ins.bind_null(16); else ins.bind(16, r.principal);  // NULL: the local user's, as before
  auto added = ins.run("insert");
  if (!added) return std::unexpected(added.error());
  return {};
}

Result<void> TraceStore::insert_started_parent_error() {
  return fail(Errc::internal, "a trace with a parent is started with start(), which checks it");
}

Result<void> TraceStore::insert_started(const TraceRecord& r) {
  return std::move(insert_started(std::span<const TraceRecord>(&r, 1)).front());
}

std::vector<Result<void>> TraceStore::insert_started(std::span<const TraceRecord> records) {
  std::vector<Result<void>> out;
  out.reserve(records.size());
  std::lock_guard lock(mu_);
  if (records.size() == 1) {
    out.push_back(records[0].parent_id ? insert_started_parent_error() : insert_locked(records[0]));
    return out;
  }
  db::Transaction tx(db_);
  if (auto r = tx.begin(); !r) return std::vector<Result<void>>(records.size(), std::unexpected(r.error()));
  // A failed INSERT undoes only itself; the others still go in with the commit.
  for (const auto& r : records) out.push_back(r.parent_id ? insert_started_parent_error() : insert_locked(r));
  if (auto r = tx.commit(); !r) return std::vector<Result<void>>(records.size(), std::unexpected(r.error()));
  return out;
}

Result<TraceRecord> TraceStore::start(const TraceStart& s) {
  auto r = prepare_start(s);
  if (!r) return r;
  std::lock_guard lock(mu_);
  if (s.parent_id) {
    auto parent = get_locked(*s.parent_id);
    if (!parent) return std::unexpected(parent.error());
    if (!*parent) return std::unexpected(not_found(*s.parent_id));
  }
  for (int attempt = 0;; ++attempt) {
    auto added = insert_locked(*r);
    if (added) return r;
    // A constraint can only be the id: another record drew the same one.
    if (added.error().code != Errc::conflict || attempt == 3) return std::unexpected(added.error());
    r->id = detail::random_trace_id();
  }
}

void TraceStore::expect_finish(const std::string& id, const std::string& principal) {
  std::lock_guard lock(ends_mu_);
  ends_due_[id] = DueEnd{++ends_announced_, principal};
}

bool TraceStore::no_end_due_locked(std::uint64_t upto, const std::string* principal) const {
  for (const auto& [id, due] : ends_due_)
    if (due.seq <= upto && (!principal || due.principal == *principal)) return false;
  return true;
}

void TraceStore::wait_finishes(const std::string* principal) {
  std::unique_lock lock(ends_mu_);
  const std::uint64_t upto = ends_announced_;
  // Not bounded in time: what follows (a checkpoint before the next run, a restore) must come
  // after the checkpoint that the end carries, however long a big workspace makes it. Every
  // announced end is written or forgotten (RunTracer::attach).
  ends_cv_.wait(lock, [&] { return no_end_due_locked(upto, principal); });
}

bool TraceStore::wait_finishes_for(std::chrono::milliseconds limit) {
  std::unique_lock lock(ends_mu_);
  const std::uint64_t upto = ends_announced_;
  return ends_cv_.wait_for(lock, limit, [&] { return no_end_due_locked(upto, nullptr); });
}

void TraceStore::wait_finished(const std::string& id) {
  if (id.empty()) return wait_finishes();
  std::unique_lock lock(ends_mu_);
  ends_cv_.wait(lock, [&] { return !ends_due_.contains(id); });
}

void TraceStore::forget_finish(const std::string& id) {
  {
    std::lock_guard lock(ends_mu_);
    if (ends_due_.erase(id) == 0) return;
  }
  ends_cv_.notify_all();
}

Result<void> TraceStore::finish(const std::string& id, const TraceFinish& f) {
  // Whatever the outcome, the end announced for `id` (if any) is no longer to come.
  struct Done {
    TraceStore* self;
    const std::string& id;
    ~Done() { self->forget_finish(id); }
  } done{this, id};
  if (!one_of(f.status, {"pass", "fail", "error", "interrupted"}))
    return fail(Errc::invalid_argument,
                fmt::format("a trace ends as pass, fail, error or interrupted, not '{}'", f.status));
  std::lock_guard lock(mu_);
  std::string ended = now_iso8601();
  // One UPDATE guarded by the status; the record is only read when the duration must come from
  // its timestamps or the update found nothing to end (to say why).
  std::optional<int64_t> duration = f.duration_ms;
  if (!duration) {
    db::Statement sel(db_, "SELECT started_at FROM traces WHERE id = ?1");
    sel.bind(1, id);
    auto row = sel.next("select");
    if (!row) return std::unexpected(row.error());
    if (!*row) return std::unexpected(not_found(id));
    duration = duration_between(sel.text(0), ended);
  }
  db::Statement upd(db_,
                    "UPDATE traces SET status = ?2, ended_at = ?3, duration_ms = ?4, exit_code = ?5, signal = ?6,"
                    " stop_reason = ?7, resources = ?8, output = ?9, cleanup = ?10, tests = ?11,"
                    " result = COALESCE(?12, result), error = ?13, policy = COALESCE(?14, policy),"
                    " network_log = ?15, changes = COALESCE(?16, changes)"
                    " WHERE id = ?1 AND status = 'running'");
  upd.bind(1, id);
  upd.bind(2, f.status);
  upd.bind(3, ended);
  upd.bind(4, *duration);
  upd.bind(5, f.exit_code);
  upd.bind(6, f.signal);
  upd.bind(7, f.stop_reason);
  bind_json(upd, 8, clean_json(f.resources));
  bind_json(upd, 9, clean_json(f.output));
  bind_json(upd, 10, clean_json(f.cleanup));
  bind_json(upd, 11, clean_json(f.tests));
  bind_json(upd, 12, clean_json(f.result));
  upd.bind(13, clean(f.error));
  bind_json(upd, 14, clean_json(f.policy));
  bind_json(upd, 15, clean_json(f.network_log));
  bind_json(upd, 16, clean_json(f.changes));
  auto changed = upd.run("update");
  if (!changed) return std::unexpected(changed.error());
  if (*changed == 0) {
    auto cur = get_locked(id);
    if (!cur) return std::unexpected(cur.error());
    if (!*cur) return std::unexpected(not_found(id));
    return fail(Errc::conflict, fmt::format("trace {} has already ended ({})", id, (*cur)->status));
  }
  return {};
}

Result<void> TraceStore::update_result(const std::string& id, const nlohmann::json& result) {
  wait_finished(id);
  std::lock_guard lock(mu_);
  db::Statement upd(db_, "UPDATE traces SET result = ?2 WHERE id = ?1 AND status = 'running'");
  upd.bind(1, id);
  bind_json(upd, 2, clean_json(result));
  auto changed = upd.run("update");
  if (!changed) return std::unexpected(changed.error());
  if (*changed == 1) return {};
  auto cur = get_locked(id);
  if (!cur) return std::unexpected(cur.error());
  if (!*cur) return std::unexpected(not_found(id));
  return fail(Errc::conflict, fmt::format("trace {} has already ended ({})", id, (*cur)->status));
}

Result<void> TraceStore::set_tests(const std::string& id, const nlohmann::json& tests, const std::string& status,
                                   const std::string& error) {
  if (!one_of(status, {"pass", "fail", "error", "interrupted"}))
    return fail(Errc::invalid_argument, fmt::format("a trace ends as pass, fail, error or interrupted, not '{}'", status));
  wait_finished(id);
  std::lock_guard lock(mu_);
  db::Statement upd(db_,
                    "UPDATE traces SET tests = ?2, status = ?3, error = CASE WHEN ?4 = '' THEN error ELSE ?4 END"
                    " WHERE id = ?1 AND status != 'running'");
  upd.bind(1, id);
  bind_json(upd, 2, clean_json(tests));
  upd.bind(3, status);
  upd.bind(4, clean(error));
  auto changed = upd.run("update");
  if (!changed) return std::unexpected(changed.error());
  if (*changed == 1) return {};
  auto cur = get_locked(id);
  if (!cur) return std::unexpected(cur.error());
  if (!*cur) return std::unexpected(not_found(id));
  return fail(Errc::conflict, fmt::format("trace {} is still running", id));
}

Result<void> TraceStore::set_changes(const std::string& id, const nlohmann::json& changes) {
  wait_finished(id);
  std::lock_guard lock(mu_);
  db::Statement upd(db_, "UPDATE traces SET changes = ?2 WHERE id = ?1");
  upd.bind(1, id);
  bind_json(upd, 2, clean_json(changes));
  auto changed = upd.run("update");
  if (!changed) return std::unexpected(changed.error());
  if (*changed == 0) return std::unexpected(not_found(id));
  return {};
}

Result<void> TraceStore::set_cleanup(const std::string& id, const nlohmann::json& cleanup) {
  wait_finished(id);
  std::lock_guard lock(mu_);
  db::Statement upd(db_, "UPDATE traces SET cleanup = ?2 WHERE id = ?1");
  upd.bind(1, id);
  bind_json(upd, 2, clean_json(cleanup));
  auto changed = upd.run("update");
  if (!changed) return std::unexpected(changed.error());
  if (*changed == 0) return std::unexpected(not_found(id));
  return {};
}

Result<std::optional<TraceRecord>> TraceStore::get(const std::string& id) {
  wait_finished(id);
  std::lock_guard lock(mu_);
  return get_locked(id);
}

Result<std::optional<TraceRecord>> TraceStore::get_locked(const std::string& id) {
  if (!detail::valid_trace_id(id)) return std::optional<TraceRecord>();
  db::Statement sel(db_, std::string(kColumns) + "WHERE id = ?1");
  sel.bind(1, id);
  auto row = sel.next("select");
  if (!row) return std::unexpected(row.error());
  if (!*row) return std::optional<TraceRecord>();
  return std::optional<TraceRecord>(row_to_record(sel));
}

Result<TracePage> TraceStore::list(const TraceQuery& q) {
  if (!q.kind.empty() && !one_of(q.kind, kKinds))
    return fail(Errc::invalid_argument, fmt::format("kind '{}' is not exec, verify, publish or service", q.kind));
  if (!q.status.empty() && !one_of(q.status, kStatuses))
    return fail(Errc::invalid_argument,
                fmt::format("status '{}' is not running, pass, fail, error or interrupted", q.status));
  std::string since;
  if (!q.since.empty()) {
    auto ms = detail::parse_iso8601_ms(q.since);
    if (!ms)
      return fail(Errc::invalid_argument,
                  fmt::format("since '{}' is not an ISO 8601 time; pass e.g. 2026-01-31T12:00:00Z", q.since));
    since = detail::format_iso8601_ms(*ms);
  }
  // A cursor is bound to its filters: continuing one under other filters would skip records silently.
  uint32_t filters = detail::fnv1a(fmt::format("{}\x1f{}\x1f{}\x1f{}\x1f{}\x1f{}\x1f{}\x1f{}", q.workspace_id, q.kind,
                                               q.status, q.parent_id, q.roots_only, since, q.who.principal,
                                               q.who.include_unrecorded));
  std::optional<detail::Cursor> cursor;
  if (!q.cursor.empty()) {
    cursor = detail::decode_cursor(q.cursor);
    if (!cursor)
      return fail(Errc::invalid_argument, "cursor is not one this server returned; call trace_list without cursor");
    if (cursor->filter_hash != filters)
      return fail(Errc::invalid_argument,
                  "cursor belongs to a listing with other filters; repeat those filters or call trace_list "
                  "without cursor");
  }
  const int limit = std::clamp(q.limit, 1, 500);
  std::string sql = std::string(kColumns) + "WHERE 1";
  std::vector<std::string> args;
  auto filter = [&](const std::string& value, const char* clause) {
    if (value.empty()) return;
    args.push_back(value);
    sql += fmt::format(" AND {} ?{}", clause, args.size());
  };
  filter(q.workspace_id, "workspace_id =");
  filter(q.kind, "kind =");
  filter(q.status, "status =");
  filter(q.parent_id, "parent_id =");
  filter(since, "started_at >=");
  if (!q.who.principal.empty()) {
    args.push_back(q.who.principal);
    sql += q.who.include_unrecorded ? fmt::format(" AND (principal = ?{} OR principal IS NULL)", args.size())
                                    : fmt::format(" AND principal = ?{}", args.size());
  }
  if (q.roots_only) sql += " AND parent_id IS NULL";
  if (cursor) {
    // Keyset paging: records added after the first page sort before the cursor and never shift it.
    args.push_back(cursor->started_at);
    args.push_back(cursor->id);
    sql += fmt::format(" AND (started_at, id) < (?{}, ?{})", args.size() - 1, args.size());
  }
  sql += fmt::format(" ORDER BY started_at DESC, id DESC LIMIT {}", limit + 1);
  wait_finished({});
  std::lock_guard lock(mu_);
  db::Statement sel(db_, sql);
  for (size_t i = 0; i < args.size(); ++i) sel.bind(int(i + 1), args[i]);
  TracePage page;
  if (auto r = sel.each("select", [&] { page.records.push_back(row_to_record(sel)); }); !r)
    return std::unexpected(r.error());
  if (page.records.size() > size_t(limit)) {
    page.records.resize(size_t(limit));
    const auto& last = page.records.back();
    page.next_cursor = detail::encode_cursor({last.started_at, last.id, filters});
  }
  return page;
}

Result<TraceCounts> TraceStore::count(const std::string& workspace_id, const PrincipalFilter& who) {
  wait_finished({});
  std::lock_guard lock(mu_);
  db::Statement sel(db_,
                    "SELECT status, COUNT(*) FROM traces WHERE parent_id IS NULL AND (?1 = '' OR workspace_id = ?1)"
                    " AND (?2 = '' OR principal = ?2 OR (?3 AND principal IS NULL)) GROUP BY status");
  sel.bind(1, workspace_id);
  sel.bind(2, who.principal);
  sel.bind(3, int64_t(who.include_unrecorded ? 1 : 0));
  TraceCounts c;
  auto counted = sel.each("count", [&] {
    std::string status = sel.text(0);
    int64_t n = sel.int64(1);
    c.total += n;
    if (status == "running") c.running = n;
    else if (status == "pass") c.pass = n;
    else if (status == "fail") c.fail = n;
    else if (status == "error") c.error = n;
    else if (status == "interrupted") c.interrupted = n;
  });
  if (!counted) return std::unexpected(counted.error());
  return c;
}

Result<int> TraceStore::mark_orphans_interrupted() {
  std::lock_guard lock(mu_);
  struct Orphan {
    std::string id, started_at;
  };
  std::vector<Orphan> orphans;
  {
    db::Statement sel(db_, "SELECT id, started_at, owner_pid, owner_start, owner_boot, owner_pidns FROM traces"
                           " WHERE status = 'running'");
    auto scanned = sel.each("select", [&] {
      detail::ProcessIdentity owner{sel.int64(2), sel.int64(3), sel.text(4), sel.text(5)};
      if (detail::owner_gone(owner)) orphans.push_back({sel.text(0), sel.text(1)});
    });
    if (!scanned) return std::unexpected(scanned.error());
  }
  if (orphans.empty()) return 0;
  db::Transaction tx(db_);
  if (auto r = tx.begin(); !r) return std::unexpected(r.error());
  int marked = 0;
  const std::string now = now_iso8601();
  for (const auto& o : orphans) {
    // status = 'running' again: another process may have marked (or its owner finished) it meanwhile.
    db::Statement upd(db_, "UPDATE traces SET status = 'interrupted', stop_reason = 'interrupted', ended_at = ?2,"
                           " duration_ms = ?3 WHERE id = ?1 AND status = 'running'");
    upd.bind(1, o.id);
    upd.bind(2, now);
    upd.bind(3, duration_between(o.started_at, now));
    auto changed = upd.run("update");
    if (!changed) return std::unexpected(changed.error());
    marked += int(*changed);
  }
  if (auto r = tx.commit(); !r) return std::unexpected(r.error());
  return marked;
}

nlohmann::json to_json(const TraceRecord& r) {
  using nlohmann::json;
  auto opt = [](const auto& v) { return v ? json(*v) : json(nullptr); };
  return json{{"id", r.id},
              {"kind", r.kind},
              {"workspace_id", r.workspace_id},
              {"parent_id", opt(r.parent_id)},
              {"name", r.name},
              {"client", r.client},
              {"principal", r.principal.empty() ? json(nullptr) : json(r.principal)},
              {"command", r.command},
              {"cwd", r.cwd},
              {"policy", r.policy},
              {"status", r.status},
              {"started_at", r.started_at},
              {"ended_at", opt(r.ended_at)},
              {"duration_ms", opt(r.duration_ms)},
              {"exit_code", opt(r.exit_code)},
              {"signal", opt(r.signal)},
              {"stop_reason", r.stop_reason},
              {"resources", r.resources},
              {"output", r.output},
              {"cleanup", r.cleanup},
              {"tests", r.tests},
              {"result", r.result},
              {"network_log", r.network_log},
              {"changes", r.changes},
              {"error", r.error}};
}

nlohmann::json to_json(const TraceCounts& c) {
  return {{"total", c.total}, {"running", c.running}, {"pass", c.pass},
          {"fail", c.fail},   {"error", c.error},     {"interrupted", c.interrupted}};
}

}  // namespace kiln::traces
