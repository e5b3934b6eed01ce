// Plain types shared by the sandbox layer and its callers (tools/ handlers, runs/, `kiln run`):
// policy in, results out. No MCP, no Asio here.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string_view>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "sandbox/egress/egress_policy.h"

namespace kiln::sandbox {

// allowlist: the sandbox keeps its empty network namespace (loopback up) and reaches the names its
// egress policy allows through Kiln's proxy only (TOOLS.md "Network allowlist").
enum class Network { none, loopback, host, allowlist };
enum class Isolation { strict, none };

// Every limit is optional: unset means "the default" (see policy.h), and an explicitly requested
// limit that cannot be enforced on this host is refused, never dropped.
struct Limits {
  std::optional<double> wall_s;
  std::optional<double> cpu_s;
  std::optional<std::uint64_t> memory_mb;
  std::optional<std::uint64_t> pids;
  std::optional<std::uint64_t> output_bytes;
  std::optional<std::uint64_t> file_size_mb;
  // How far the workspace's filesystem may fill while a run goes on (free space measured from
  // outside, the run's own kept output excepted).
  std::optional<std::uint64_t> disk_mb;
};

// A folder of Kiln's state bound read-write inside the sandbox below /var/lib/kiln (a service's
// data). Identity as checked when it was prepared: the helper refuses a folder swapped since.
struct DataBind {
  std::string source;  // absolute host path, no symlinks
  std::string target;  // inside, below /var/lib/kiln/
  std::uint64_t dev = 0, ino = 0;
};

struct SandboxPolicy {
  Network network = Network::none;
  Isolation isolation = Isolation::strict;
  Limits limits;                                // after defaults: every field set
  Limits requested;                             // what the caller/kiln.json asked for explicitly
  std::map<std::string, std::string> env;       // extra variables asked for on purpose
  std::vector<std::string> secrets;             // names; values resolved by SecretStore
  std::string workspace_root;                   // absolute real path
  std::string workspace_id;
  // The principal the sandbox belongs to (TOOLS.md, principals): only calls made for the same
  // owner find it or its runs; for everyone else it does not exist.
  std::string owner;
  // The sandbox hosts services (services/): its loopback is up even with network none, and with
  // Kiln run as root the ids inside are 65534 (nobody), because postgres refuses to run as root.
  bool hosts_services = false;
  std::vector<DataBind> data_binds;
  // The workspace is mounted read-only (and Landlock grants it read/execute only): an app runs from
  // an immutable published copy. /tmp, /dev/shm and data_binds stay writable.
  bool workspace_readonly = false;
  // network allowlist: what the request (or kiln.json) allows; the server's ceiling narrows it when
  // the sandbox is made.
  std::optional<egress::Policy> egress;
  // An app's: the --network-allow ceiling of the session that published it (it narrows the app as
  // it narrowed that session, whichever kiln serve runs it).
  std::optional<egress::Policy> egress_publisher_ceiling;
};

enum class StopReason {
  exit, signal, timeout, cpu_limit, memory_limit, pids_limit, output_limit, disk_limit, cancelled, killed,
  setup_failed, interrupted,
};
const char* to_string(StopReason r);
const char* to_string(Network n);

enum class Stream { stdout_, stderr_, both };

// The tail of one output stream as it is returned in a result: the last bytes (already
// redacted) with what the caller needs to page the rest through process_output.
struct StreamTail {
  std::string text;             // the tail, UTF-8 safe (cut at a character boundary)
  std::uint64_t total_bytes = 0;  // bytes the command wrote to this stream (after redaction)
  std::uint64_t tail_offset = 0;  // where `text` starts in the stream
  bool truncated = false;         // true when text is not the whole stream
  std::uint64_t dropped_bytes = 0;  // bytes beyond the output cap that were not kept
};

struct ExecResult;
struct CleanupReport;

struct ExecRequest {
  std::string owner;              // who asks: a sandbox_id of another owner is "no live sandbox"
  std::vector<std::string> argv;  // already split; a string command becomes /bin/sh -c
  std::string display_command;    // for traces and listings
  std::string cwd;                // absolute path inside the sandbox
  std::optional<std::string> stdin_data;
  bool background = false;
  std::optional<double> timeout_s;  // overrides limits.wall_s
  std::size_t tail_bytes = 16 * 1024;
  bool want_progress = false;     // collect output chunks for notifications/progress
  std::map<std::string, std::string> env;  // per-exec additions to the sandbox's environment
  // Called on the sandbox's event loop with each redacted chunk as it arrives (`kiln run`
  // streams to the terminal with it). Must not block for long.
  std::function<void(bool is_stderr, std::string_view chunk)> live_output;
  // Where the run's output files go (an existing folder the caller owns, e.g. the trace's);
  // empty: <state>/runs/<run_id>.
  std::string run_dir;
  // Called once with the final result, before a foreground caller is woken (so a trace written
  // here is complete when the tool answers). Runs on the sandbox's event loop; keep it short.
  std::function<void(const ExecResult&)> on_finished;
  // Called once on the same loop right after the caller has been woken with the result, before
  // the run's clean-up: work the answer does not wait for (RunTracer writes the trace's end here,
  // having told the trace store in on_finished that it is coming).
  std::function<void()> after_result;
  // A long-lived server (a service): output past output_bytes is counted as dropped instead of
  // killing the tree, so a chatty server keeps serving (its first output_bytes stay readable); and
  // disk_mb, a budget of one command measured as the filesystem's free space since it started, does
  // not apply (over hours it would count every other writer); the free-space reserve still does.
  bool long_lived = false;
  // Fresh sandboxes only: called with the clean-up report once the sandbox is gone.
  std::function<void(const CleanupReport&)> on_sandbox_cleanup;
  // Called on the caller's thread once the run is prepared, just before the command is handed to
  // the sandbox; an error stops it there and nothing runs. The trace's first row, written beside
  // the preparation, must be in by then (RunTracer::attach).
  std::function<Result<void>()> before_start;
};

struct ExecResult {
  std::string run_id;
  std::string sandbox_id;
  bool fresh_sandbox = false;
  std::optional<int> exit_code;
  int signal = 0;
  StopReason stop_reason = StopReason::exit;
  std::int64_t duration_ms = 0;
  double duration_precise_ms = 0;
  StreamTail out, err;
  std::optional<std::uint64_t> peak_memory_bytes;
  std::string peak_memory_source;  // "cgroup v1 memory.max_usage_in_bytes", "rusage maxrss", ...
  std::uint64_t user_ms = 0, sys_ms = 0;
  std::vector<std::string> limits_hit;
  std::string run_dir;
  nlohmann::json isolation;
  std::string warning;  // set loudly for isolation none
  // Set when the output could not be saved in the state directory (a full disk): what happened,
  // in words. The tails are still in `out`/`err`; the pages beyond them are lost.
  std::string output_error;
  // network allowlist only: every proxy decision of this run (TOOLS.md network_log), and totals.
  nlohmann::json network_log;
  nlohmann::json network_summary;
};

struct BackgroundStarted {
  std::string run_id;
  std::string sandbox_id;
  int pid = 0;  // inside the sandbox's pid namespace (host pid for isolation none)
  std::string run_dir;
  nlohmann::json isolation;
  std::string warning;
};

struct OutputPage {
  std::string data;
  std::uint64_t offset = 0;
  std::uint64_t next_offset = 0;
  std::uint64_t total_bytes = 0;
  bool eof = false;      // no more data will come after next_offset (process done, all read)
  bool running = false;
  std::optional<int> exit_code;
  int signal = 0;
  std::optional<StopReason> stop_reason;
};

struct SandboxInfo {
  std::string sandbox_id;
  nlohmann::json isolation;
  std::string warning;
  double setup_ms = 0;
};

struct CleanupReport {
  std::string sandbox_id;
  std::vector<std::string> processes_killed;  // run ids that were still running
  bool namespaces_gone = false;                // helper exited: its mount/pid/net namespaces died with it
  std::vector<std::string> cgroups_removed;
  std::vector<std::string> temp_dirs_removed;
  std::vector<std::string> leftovers;          // anything that could not be cleaned, in words
  double duration_ms = 0;
};

}  // namespace kiln::sandbox
