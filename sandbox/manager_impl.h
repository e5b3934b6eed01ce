// Private to the sandbox layer: the state behind SandboxManager (sandboxes, runs, the Asio loop
// that reads output, watches helpers and enforces time). Included by manager*.cpp only.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>

#include "sandbox/cgroups.h"
#include "sandbox/combined_output.h"
#include "sandbox/egress/egress_proxy.h"
#include "sandbox/helper_zygote.h"
#include "sandbox/manager.h"
#include "sandbox/output_spool.h"
#include "sandbox/policy.h"
#include "sandbox/redactor.h"
#include "sandbox/secrets.h"

namespace kiln::sandbox {

// How many finished runs stay findable (their output, by run id) per manager.
inline constexpr std::size_t kMaxFinishedRuns = 1000;

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

struct Run;

struct Sandbox {
  std::string id;
  SandboxPolicy policy;
  bool fresh = false;        // one exec, destroyed after it
  bool spare = false;        // a warm fresh sandbox nobody has taken yet (under Impl::mu)
  std::string spare_key;     // the policy fingerprint it was made for
  FolderIdentity workspace;  // the workspace folder bound in when it was built (a spare checks it when taken)
  std::optional<SandboxPolicy> respawn;  // fresh: the policy to warm the next spare with, once done
  bool unsandboxed = false;  // isolation "none": plain children, no helper
  std::shared_ptr<const Redactor> redactor;
  std::map<std::string, std::string> env;  // the full sandbox environment (secrets included)
  std::optional<CgroupSet> cg;
  std::vector<CgroupSet> exec_cg_pool;  // emptied per-exec groups to reuse (under Impl::mu)
  nlohmann::json isolation;
  std::string warning;
  double setup_ms = 0;
  Clock::time_point created = Clock::now();
  Clock::time_point last_used = Clock::now();  // under Impl::mu

  // io thread only
  pid_t helper_pid = -1;
  bool helper_is_child = true;  // false: forked by the zygote, signalled through `pidfd` only
  int control_fd = -1;  // owned by `control`
  std::unique_ptr<asio::posix::stream_descriptor> control;
  std::unique_ptr<asio::posix::stream_descriptor> pidfd;
  std::map<int, std::shared_ptr<Run>> execs;
  // `connect` requests waiting for pid 1's answer, by the id they were sent with (ids are taken
  // from next_exec, so they never meet an exec's).
  std::map<int, std::shared_ptr<std::promise<Result<UniqueFd>>>> connects;
  int next_exec = 1;
  bool helper_gone = false;
  std::vector<std::function<void()>> on_helper_gone;
  std::atomic<bool> closing{false};
  HostBudget::Lease lease;  // this sandbox's share of the server-wide ceilings (given back when it goes)
  // network allowlist: what the proxy enforces for it, and each exec's decision log by exec id
  // (kept while the exec's run is unfinished; io thread).
  std::shared_ptr<egress::SandboxEgress> egress;
  std::map<int, std::shared_ptr<egress::NetworkLog>> egress_logs;
};

struct Run {
  std::string id;
  std::string sandbox_id;
  std::string owner;  // the sandbox's owner (its policy's), see SandboxPolicy::owner
  std::weak_ptr<Sandbox> sandbox;
  std::shared_ptr<const Redactor> redactor;
  ExecRequest req;
  Limits limits;
  std::string run_dir;
  std::unique_ptr<OutputSpool> out, err;
  std::unique_ptr<CombinedOutput> both;  // declared after out and err, which it reads
  std::unique_ptr<StreamRedactor> rout, rerr;
  int exec_id = 0;
  bool direct_exec = false;  // argv runs without a shell in front (see launch)
  std::shared_ptr<egress::NetworkLog> netlog;  // network allowlist only

  // io thread only
  std::uint64_t raw_bytes = 0;
  std::unique_ptr<asio::posix::stream_descriptor> out_pipe, err_pipe, pidfd;
  std::vector<char> out_buf, err_buf;
  std::unique_ptr<asio::steady_timer> wall_timer, drain_timer, cpu_timer, disk_timer;
  std::shared_ptr<std::function<void()>> cpu_timer_tick, disk_timer_tick;
  std::optional<CgroupSet> cg;   // per-exec group (session sandboxes)
  CgroupUsage cg_before;         // sandbox group counters at start, to attribute limits
  pid_t host_pid = -1;           // isolation none
  int open_pipes = 0;

  mutable std::mutex mu;
  std::condition_variable cv;
  int stdin_fd = -1;             // ours, for process_input (under mu)
  bool started = false, exited = false, finished = false;
  std::optional<Error> start_error;
  int pid = 0;
  std::optional<int> exit_code;
  int signal = 0;
  std::optional<StopReason> pending;  // why we are killing it (timeout, cancel, ...)
  StopReason reason = StopReason::exit;
  std::uint64_t user_ms = 0, sys_ms = 0, maxrss_kb = 0;
  std::optional<std::uint64_t> peak_bytes;
  std::string peak_source;
  std::vector<std::string> limits_hit;
  Clock::time_point t_start = Clock::now(), t_end;
  std::uint64_t version = 0;  // bumps on every output or state change (long-poll)
  std::string progress;       // pending text for notifications/progress
  std::uint64_t progress_skipped = 0;
};

struct SandboxManager::Impl : std::enable_shared_from_this<SandboxManager::Impl> {
  explicit Impl(ManagerOptions o);

  ManagerOptions opt;
  HostBudget budget{opt.ceilings};
  CgroupLayout cg;
  SecretStore secrets;
  // Handlers still queued when the manager goes (a wall timer, a helper-exit watch) hold the Impl
  // through shared_from_this; the destructor destroys them unrun (execution_context::shutdown),
  // else they and the Impl keep each other alive forever (found by LeakSanitizer, kiln run --timeout).
  struct Loop : asio::io_context {
    using asio::io_context::shutdown;
  };
  Loop io;
  asio::executor_work_guard<asio::io_context::executor_type> work{io.get_executor()};
  egress::EgressProxy egress_proxy{io, egress::ProxyOptions{.hosts_file = opt.egress_hosts_file}};
  std::thread thread;
  std::unique_ptr<HelperZygote> zygote;  // null: every helper is exec'd (KILN_SANDBOX_ZYGOTE=0)
  std::vector<std::function<void(const std::string&)>> gone_listeners;  // guarded by mu
  std::unique_ptr<asio::steady_timer> reaper;

  mutable std::mutex mu;
  std::map<std::string, std::shared_ptr<Sandbox>> sandboxes;
  std::map<std::string, std::shared_ptr<Run>> runs;
  std::deque<std::string> finished_runs;  // oldest first, bounded
  Redactor all_secrets;
  std::atomic<bool> stopped{false};

  // Warm spares (sandbox/spare_pool.cpp): each fresh exec that finishes asks for one more sandbox
  // of its policy, built in the background, so the pool follows how many fresh execs of a policy
  // run at once (one for an agent working in sequence, a burst's size for parallel bursts) and a
  // fresh exec pays only for its command. Made on one long-lived thread, because a helper's
  // parent-death signal follows the thread that forked it, and only while no fresh exec is
  // building its own sandbox, so the pool never competes with a request that is waiting.
  std::mutex spare_mu;
  std::condition_variable_any spare_cv;
  std::deque<SandboxPolicy> spare_jobs;        // under spare_mu
  std::map<std::string, std::vector<std::shared_ptr<Sandbox>>> spares;  // ready, by policy key, under mu
  std::size_t spare_count = 0;                // ready spares of all keys, under mu
  std::string spare_building;                 // key the thread is building now, under mu
  std::condition_variable spare_ready;        // with mu: a build ended
  std::atomic<int> cold_builds{0};            // fresh execs building their own sandbox now
  std::jthread spare_thread;                  // under spare_mu
  bool spares_stopped = false;                // under spare_mu: no thread is started again
  std::shared_ptr<Sandbox> take_spare(const SandboxPolicy& policy);
  void want_spare(const SandboxPolicy& policy);
  std::size_t spare_cap() const;  // ready and queued spares of all policies together
  void stop_spares();
  void retire_old_spares();
  void retire_all_spares();  // under pressure: idle spares make room for a real request

  // Runs `f` on the io thread and waits for its result.
  template <class F>
  auto on_io(F f) -> decltype(f()) {
    if (io.get_executor().running_in_this_thread()) return f();
    std::packaged_task<decltype(f())()> task(std::move(f));
    auto fut = task.get_future();
    asio::post(io, [&task] { task(); });
    return fut.get();
  }

  // How a new sandbox gets its share of the server-wide ceilings: a session sandbox is refused at
  // once when there is no room, a fresh exec waits (up to its wall time), a spare is just skipped.
  enum class Admission { refuse, wait, spare };
  Result<HostBudget::Lease> admit(const SandboxPolicy& policy, Admission how, std::stop_token stop);
  Result<std::shared_ptr<Sandbox>> make_sandbox(SandboxPolicy policy, bool fresh, std::stop_token stop,
                                                Admission how = Admission::refuse);
  Result<std::shared_ptr<Run>> launch(const std::shared_ptr<Sandbox>& sb, ExecRequest req);
  // sandbox/disk_watch.cpp: the free-space reserve before a run, the disk budget during it (io thread).
  Result<void> check_disk_before(const SandboxPolicy& p) const;
  void watch_disk(const std::shared_ptr<Run>& run, const SandboxPolicy& policy);
  std::shared_ptr<Run> find_run(const std::string& id) const;
  std::shared_ptr<Sandbox> find_sandbox(const std::string& id) const;
  // The same, but only when it belongs to `owner`: what every call made for a client uses, so
  // another owner's id takes exactly the path of an unknown one.
  std::shared_ptr<Run> find_run_of(const std::string& id, const std::string& owner) const;
  std::shared_ptr<Sandbox> find_sandbox_of(const std::string& id, const std::string& owner) const;

  // io thread
  void watch_control(const std::shared_ptr<Sandbox>& sb);
  void watch_helper_exit(const std::shared_ptr<Sandbox>& sb);
  void watch_unsandboxed_exit(const std::shared_ptr<Run>& run);  // isolation "none": the command's own pidfd
  // SIGKILL to the sandbox's pid 1 side (the helper's outer process), through its pidfd when it
  // has one: a zygote's child may be reaped already and its pid reused.
  void kill_helper(const Sandbox& sb);
  void handle_message(const std::shared_ptr<Sandbox>& sb, const nlohmann::json& m, std::vector<UniqueFd>& fds);
  // sandbox/manager_connect.cpp: a `connected` or connect `error` reply; false when `m` answers none.
  bool connect_reply(const std::shared_ptr<Sandbox>& sb, const nlohmann::json& m, std::vector<UniqueFd>& fds);
  void fail_connects(const std::shared_ptr<Sandbox>& sb);
  void helper_lost(const std::shared_ptr<Sandbox>& sb);
  void read_pipe(const std::shared_ptr<Run>& run, bool is_err);
  void on_output(const std::shared_ptr<Run>& run, bool is_err, std::string_view data);
  void terminate(const std::shared_ptr<Run>& run, StopReason why, int sig = 9);
  void on_exited(const std::shared_ptr<Run>& run, std::optional<int> code, int sig, std::uint64_t user_ms,
                 std::uint64_t sys_ms, std::uint64_t maxrss_kb);
  void maybe_finish(const std::shared_ptr<Run>& run);
  void finish(const std::shared_ptr<Run>& run);
  void retire_sandbox(const std::shared_ptr<Sandbox>& sb, std::function<void(CleanupReport)> done);
  void arm_reaper();

  ExecResult result_of(const std::shared_ptr<Run>& run, const std::shared_ptr<Sandbox>& sb) const;
  void wait_finished(const std::shared_ptr<Run>& run, std::stop_token stop, const OutputObserver& observer);
};

std::string random_id(const char* prefix, std::size_t bytes);

}  // namespace kiln::sandbox
