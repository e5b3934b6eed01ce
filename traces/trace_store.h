// The trace store: one durable record per exec, verify (and each verify step) and publish, so an
// agent can ask later what ran, under which policy and how it ended. Output bytes are files beside it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "db/database.h"

namespace kiln::traces {

// A JSON member that is null means "not recorded". Secret values are replaced by `[secret:NAME]`
// by the store's scrubber (set_scrubber) in every string it writes.
struct TraceRecord {
  std::string id;                        // "tr_" + 16 hex digits
  std::string kind;                      // exec | verify | publish | service
  std::string workspace_id;
  std::optional<std::string> parent_id;  // a verify step's verify
  std::string name;                      // check name of a verify step, else ""
  nlohmann::json client;                 // {name, version} from initialize
  std::string principal;                 // whom the run was for (TOOLS.md); "" in records made before
  std::string command;
  std::string cwd;
  nlohmann::json policy;                 // network, limits, isolation report, env names, secret names
  std::string status;                    // running | pass | fail | error | interrupted
  std::string started_at;                // ISO 8601 UTC with ms
  std::optional<std::string> ended_at;
  std::optional<int64_t> duration_ms;
  std::optional<int> exit_code;
  std::optional<int> signal;             // number of the signal that ended the process
  std::string stop_reason;
  nlohmann::json resources;              // {peak_memory_bytes, peak_memory_source, user_ms, sys_ms}
  nlohmann::json output;                 // {stdout_bytes, stderr_bytes, dropped_bytes, truncated}
  nlohmann::json cleanup;
  nlohmann::json tests;                  // parsed test report of a test step
  nlohmann::json network_log;            // egress decisions (network allowlist runs only; else null)
  nlohmann::json changes;                // {added, modified, deleted, paths, checkpoint_before/after}; null: none taken
  nlohmann::json result;                 // the caller's own summary (verify: per-check results)
  std::string error;
};

struct TraceStart {
  std::string kind;
  std::string workspace_id;
  std::optional<std::string> parent_id;
  std::string name;
  nlohmann::json client;
  std::string principal;
  std::string command;
  std::string cwd;
  nlohmann::json policy;
  nlohmann::json result;
  std::string started_at;  // empty: now
};

// Which principal's records a listing or a count may see. Records made before principals were
// recorded have none; they are the local user's, so whoever reads as the local user says so.
struct PrincipalFilter {
  std::string principal;            // empty: every principal's (only for tests)
  bool include_unrecorded = false;  // also records without a principal
};

struct TraceFinish {
  std::string status;  // pass | fail | error | interrupted
  std::optional<int> exit_code;
  std::optional<int> signal;
  std::string stop_reason;
  nlohmann::json resources;
  nlohmann::json output;
  nlohmann::json cleanup;
  nlohmann::json tests;
  nlohmann::json result;               // null keeps what update_result stored
  nlohmann::json network_log;          // the egress proxy's decisions (null: no allowlist)
  nlohmann::json policy;               // null keeps the policy recorded at start (a fresh
                                       // sandbox's isolation report is only known at the end)
  std::string error;
  std::optional<int64_t> duration_ms;  // a monotonic measurement; nullopt: from the timestamps
  nlohmann::json changes;              // what the run changed (null keeps what set_changes stored)
};

struct TraceQuery {
  std::string workspace_id;  // each filter: empty means any
  std::string kind;
  std::string status;
  std::string parent_id;
  bool roots_only = false;   // leave out verify steps
  std::string since;         // ISO 8601; records started at or after it
  PrincipalFilter who;
  int limit = 50;            // clamped to 1..500
  std::string cursor;        // next_cursor of the previous page
};

struct TracePage {
  std::vector<TraceRecord> records;  // newest first
  std::string next_cursor;           // empty on the last page
};

// Top-level records only: a verify's steps are counted in their verify.
struct TraceCounts {
  int64_t total = 0, running = 0, pass = 0, fail = 0, error = 0, interrupted = 0;
};

struct OutputSlice {
  std::string data;  // raw bytes; may end inside a UTF-8 sequence
  uint64_t offset = 0;
  uint64_t next_offset = 0;
  uint64_t total_bytes = 0;  // size when read; a running trace's output still grows
  bool eof = false;
};

struct GrepMatch {
  uint64_t line_number = 0;  // 1-based, counted from the start of the stream
  uint64_t offset = 0;       // byte offset of the line (or of the scan start within it)
  std::string text;          // without the newline, cut to kGrepLineBytes
  bool truncated = false;
};

struct GrepResult {
  std::vector<GrepMatch> matches;
  uint64_t next_offset = 0;  // where to continue; always a line start
  uint64_t total_bytes = 0;
  bool eof = false;          // nothing left to scan (for now, if the trace is still running)
};

inline constexpr size_t kOutputPageMax = 128 * 1024;
inline constexpr size_t kGrepLineBytes = 1000;

class TraceStore {
 public:
  // Creates <state_dir> (0700) and <state_dir>/traces.db (0600), migrates the schema, and marks
  // interrupted the running records of processes that are gone.
  static Result<std::unique_ptr<TraceStore>> open(const std::string& state_dir);
  // open() in two steps, for a server that answers before its stores are open (`kiln mcp`): the
  // object exists at once, open_database() does all that open() does (interrupted runs included);
  // nothing else may be called before it succeeded.
  static std::unique_ptr<TraceStore> unopened(const std::string& state_dir);
  Result<void> open_database();
  TraceStore(const TraceStore&) = delete;
  TraceStore& operator=(const TraceStore&) = delete;

  const std::string& dir() const { return dir_; }

  // Every string written to the store passes `scrub` first (servers install the secret
  // redactor): a record keeps what callers hand it, arguments included, so the store is the one
  // place no caller can forget. Set it once, before the store is used.
  using Scrubber = std::function<std::string(std::string_view)>;
  void set_scrubber(Scrubber scrub) { scrub_ = std::move(scrub); }

  // Records a run as running, owned by this process.
  Result<TraceRecord> start(const TraceStart& s);
  // start() in two halves, for a caller that writes the row beside other work: the record as it
  // will be stored, with its id drawn (no database work), then its INSERT. Only for records
  // without a parent; an id another record already has is an error (conflict), not drawn again.
  Result<TraceRecord> prepare_start(const TraceStart& s) const;
  Result<void> insert_started(const TraceRecord& r);
  // insert_started for several records in one transaction (one commit instead of one each), with
  // one result per record in order; a failed commit fails them all.
  std::vector<Result<void>> insert_started(std::span<const TraceRecord> records);
  // Ends a running record; conflict if it has already ended.
  Result<void> finish(const std::string& id, const TraceFinish& f);
  // The end of record `id` will be written a moment from now, by finish() on another thread
  // (RunTracer writes a sandbox_exec's end after its caller has the result). Until then every
  // read or update of that record here waits for it, and lists and counts wait for every such
  // end, so nobody who was told that a run ended can read it as still running.
  void expect_finish(const std::string& id, const std::string& principal);
  // The announced end will not come after all (its writer failed before finish()).
  void forget_finish(const std::string& id);
  // Waits until every end announced so far for `principal` (every principal's when null) is
  // written; ends announced while it waits are not waited for, so a busy server cannot starve it.
  void wait_finishes(const std::string* principal = nullptr);
  // The same for every principal, but for at most `limit`: false if an end is still unwritten
  // then (at exit, where a writer that never comes must not keep the process alive).
  bool wait_finishes_for(std::chrono::milliseconds limit);
  // Replaces `result` of a running record (a verify's progress so far).
  Result<void> update_result(const std::string& id, const nlohmann::json& result);
  // Attaches the parsed test report to an ended record (read after the run) and sets its status
  // (a step that exited 0 with failed tests is "fail"); running records are refused.
  Result<void> set_tests(const std::string& id, const nlohmann::json& tests, const std::string& status,
                         const std::string& error = {});
  // Records the clean-up of a run's sandbox, which may finish after the run's record ended.
  Result<void> set_cleanup(const std::string& id, const nlohmann::json& cleanup);
  // What the run changed in its workspace (automatic checkpoints around it).
  Result<void> set_changes(const std::string& id, const nlohmann::json& changes);
  Result<std::optional<TraceRecord>> get(const std::string& id);
  Result<TracePage> list(const TraceQuery& q);
  Result<TraceCounts> count(const std::string& workspace_id, const PrincipalFilter& who);  // workspace empty: every one
  // Running records whose process (pid + start time + boot id) is gone become "interrupted".
  Result<int> mark_orphans_interrupted();

  // <state_dir>/traces/<id>/: the runner writes `stdout` and `stderr` there, and makes the folder
  // (0700) with the first byte of output; a run that printed nothing has none.
  Result<std::string> output_dir(const std::string& id);
  // A negative offset counts from the end (-4096: the last 4 KiB). limit 0: the maximum.
  Result<OutputSlice> read_output(const std::string& id, const std::string& stream, int64_t offset,
                                  size_t limit);
  // Lines matching a PCRE2 pattern, from `offset` on; stops after limit_matches (clamped 1..1000)
  // matches or about 64 MiB scanned.
  Result<GrepResult> grep_output(const std::string& id, const std::string& stream, const std::string& pattern,
                                 uint64_t offset, int limit_matches);

 private:
  explicit TraceStore(std::string dir) : dir_(std::move(dir)) {}
  Result<std::optional<TraceRecord>> get_locked(const std::string& id);
  Result<void> insert_locked(const TraceRecord& r);
  static Result<void> insert_started_parent_error();
  Result<std::string> stream_path(const std::string& id, const std::string& stream);
  std::optional<uint64_t> cached_line(const std::string& key);
  void cache_line(const std::string& key, uint64_t line);

  void wait_finished(const std::string& id);  // empty: every end announced so far

  std::string clean(std::string_view s) const;
  std::string clean(const std::string& s) const { return clean(std::string_view(s)); }
  nlohmann::json clean_json(const nlohmann::json& j) const;

  std::string dir_;
  Scrubber scrub_;
  db::Database db_;
  std::mutex mu_;  // one connection, one statement sequence at a time
  std::mutex ends_mu_;  // never held while mu_ is wanted
  std::condition_variable ends_cv_;
  struct DueEnd {
    std::uint64_t seq;
    std::string principal;
  };
  std::map<std::string, DueEnd> ends_due_;  // by trace id
  std::uint64_t ends_announced_ = 0;
  // No end announced up to `upto` (for `principal`, or anyone's when null) is still due.
  bool no_end_due_locked(std::uint64_t upto, const std::string* principal) const;
  // Line number at each grep's next_offset, so a continued grep need not recount from byte 0;
  // output files only grow, so a prefix's line count never changes.
  std::mutex line_mu_;
  std::map<std::string, uint64_t> line_cache_;
};

nlohmann::json to_json(const TraceRecord& r);  // every field present; null where not recorded
nlohmann::json to_json(const TraceCounts& c);

// Current time as ISO 8601 UTC with milliseconds ("2026-11-30T20:15:02.123Z").
std::string now_iso8601();

}  // namespace kiln::traces
