// The sandbox engine the server and `kiln run` talk to: creates sandboxes (one kiln-sandbox
// helper each), runs commands in them, keeps their output, enforces wall time and output caps
// from outside, and always cleans up. Plain C++ types in, std::expected out; Asio stays inside.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/unique_fd.h"
#include "sandbox/host_budget.h"
#include "sandbox/types.h"

namespace kiln::sandbox {

struct ManagerOptions {
  std::string state_dir;            // runs/ and secrets/ live here; never visible inside
  std::string helper_path;          // kiln-sandbox
  bool allow_unsandboxed = false;   // --allow-unsandboxed: isolation "none" permitted
  std::chrono::seconds idle_timeout{1800};
  bool cleanup_stale = true;        // remove leftovers of a crashed server at start
  bool warm_spares = true;          // keep a fresh sandbox ready per recent policy (servers, not `kiln run`)
  bool zygote = true;               // fork helpers from one `kiln-sandbox --zygote` (not for one sandbox and out)
  HostCeilings ceilings;            // server-wide: live sandboxes, their memory and pids, disk reserve
  // --network-allow FILE: the most any sandbox of this server may reach; a request narrows it,
  // never widens it, and network "host" is refused while it is set.
  std::optional<egress::Policy> network_ceiling;
  std::string egress_hosts_file;    // KILN_EGRESS_HOSTS: names mapped before DNS (tests, operators)
};

// Called on the waiting caller's thread, coalesced (~50 ms), with redacted text.
using OutputObserver = std::function<void(std::uint64_t bytes_so_far, std::string_view text)>;

class SandboxManager {
 public:
  explicit SandboxManager(ManagerOptions options);
  ~SandboxManager();
  SandboxManager(const SandboxManager&) = delete;
  SandboxManager& operator=(const SandboxManager&) = delete;

  // Limits defaults for this host (cgroup-enforced ones only where cgroups work) and refusal of
  // explicitly requested limits that nothing here can enforce. Call on a fresh policy.
  Result<void> finalize_policy(SandboxPolicy& policy) const;

  // A session sandbox that lives until destroy(), idle reaping or shutdown.
  Result<SandboxInfo> create(SandboxPolicy policy, std::stop_token stop = {});

  // Runs in `sandbox_id` (found only if it belongs to req.owner), or (empty id) in a fresh sandbox
  // built from `fresh_policy` (whose owner must be req.owner) and destroyed afterwards. Foreground: blocks until done (or `stop`, which kills the tree).
  Result<ExecResult> exec(const std::string& sandbox_id, const SandboxPolicy* fresh_policy, ExecRequest req,
                          std::stop_token stop = {}, OutputObserver observer = {});
  Result<BackgroundStarted> start(const std::string& sandbox_id, const SandboxPolicy* fresh_policy,
                                  ExecRequest req, std::stop_token stop = {});

  // Every call below that names a sandbox or a run takes the `owner` it is made for: an id of
  // another owner's gets exactly the answer an unknown id gets (TOOLS.md, principals).

  // Paged output of a run; waits up to wait_ms for data beyond `offset` (long poll).
  Result<OutputPage> output(const std::string& owner, const std::string& run_id, Stream stream, std::uint64_t offset,
                            std::size_t limit, int wait_ms, std::stop_token stop = {});
  Result<std::size_t> input(const std::string& owner, const std::string& run_id, std::string_view data, bool close);
  // SIGKILL (default) kills the run's whole tree; other signals go to its process group.
  // Returns the stop reason once it ended, or nullopt if it is still running.
  Result<std::optional<StopReason>> kill(const std::string& owner, const std::string& run_id, int signal);

  // The owner's live sandboxes (optionally of one workspace) with their processes.
  nlohmann::json list(const std::string& owner, const std::string& workspace_id = {}) const;
  Result<CleanupReport> destroy(const std::string& owner, const std::string& sandbox_id);
  // A TCP connection to 127.0.0.1:`port` inside the sandbox's own network namespace (an app or
  // service listening there), opened by the sandbox's pid 1 and handed over. The socket is
  // non-blocking and connected or still connecting: wait for writability and read SO_ERROR (a
  // port nobody listens on shows as ECONNREFUSED there; the non-blocking connect does not wait
  // for the refusal). Errors: not_found for an unknown, another owner's or a gone sandbox.
  // Thread-safe; `timeout` bounds the wait for the helper's answer. Isolation none: a plain
  // connect to the host's loopback.
  Result<UniqueFd> connect(const std::string& owner, const std::string& sandbox_id, int port,
                           std::chrono::milliseconds timeout);
  // The policy a live sandbox was created with (secret values are not part of it).
  std::optional<SandboxPolicy> policy_of(const std::string& owner, const std::string& sandbox_id) const;

  // Redacts every secret value any sandbox of this server has used.
  std::string redact(std::string_view text) const;
  void redact_json(nlohmann::json& j) const;

  const ManagerOptions& options() const;

  // Kills and cleans every sandbox (server shutdown).
  void shutdown();

  // Called (on the manager's event loop; keep it short) with the id of every sandbox that is gone:
  // destroyed, reaped, its helper dead, or shut down. Its processes are gone by then.
  void on_sandbox_gone(std::function<void(const std::string& sandbox_id)> listener);

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

// Parses a signal name ("TERM", "SIGKILL", "9"); 0 when unknown.
int parse_signal(const std::string& s);
const char* signal_name(int sig);

}  // namespace kiln::sandbox
