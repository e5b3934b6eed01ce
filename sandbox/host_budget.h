// Server-wide ceilings on what all live sandboxes may claim together (their number, the sum of
// their memory and process limits) and the free disk space below which runs are refused or
// stopped, so that many sandboxes at once cannot exhaust the host (SANDBOX_CASES 20 and 36).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <list>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace kiln::sandbox {

struct HostCeilings {
  std::size_t max_sandboxes = 0;     // live sandboxes at once (spares included); 0 = the default
  std::uint64_t memory_mb = 0;       // sum of live sandboxes' memory limits; 0 = the default
  std::uint64_t pids = 0;            // sum of live sandboxes' pids limits; 0 = the default
  std::uint64_t disk_reserve_mb = 0; // free space kept on the workspace's and state's filesystems
  // --network-allow FILE: the network ceiling (a JSON allowlist); empty: none. Carried here so every
  // server that takes the ceilings (kiln mcp, kiln serve --mcp, apps) takes it too.
  std::string network_allow_file;
};

// Fills zeros with this host's defaults: 128 sandboxes, the machine's RAM, half the kernel's
// thread limit, and min(2 GiB, 5% of a filesystem) as the reserve (computed per filesystem).
HostCeilings host_ceilings_with_defaults(HostCeilings asked);

// What one sandbox counts against the ceilings.
struct BudgetClaim {
  std::uint64_t memory_mb = 0;
  std::uint64_t pids = 0;
};

class HostBudget {
 public:
  explicit HostBudget(HostCeilings ceilings);

  // Room for one sandbox, given back by release() (or by the lease's destructor).
  class Lease {
   public:
    Lease() = default;
    Lease(HostBudget* b, BudgetClaim c) : budget_(b), claim_(c) {}
    Lease(Lease&& o) noexcept : budget_(std::exchange(o.budget_, nullptr)), claim_(o.claim_) {}
    Lease& operator=(Lease&& o) noexcept {
      if (this != &o) {
        release();
        budget_ = std::exchange(o.budget_, nullptr);
        claim_ = o.claim_;
      }
      return *this;
    }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease() { release(); }
    void release();
    explicit operator bool() const { return budget_ != nullptr; }

   private:
    HostBudget* budget_ = nullptr;
    BudgetClaim claim_;
  };

  // Takes room at once, or fails (Errc::too_large) with the numbers and what to do. Room that
  // others are already waiting for is theirs: with anyone queued, this fails.
  Result<Lease> try_acquire(BudgetClaim claim);
  // Waits for room until `deadline` or `stop`; a claim that could never fit fails at once.
  // Waiters are served in arrival order, each woken only when room is given to it. `meanwhile`,
  // if set, is called every `every` while it waits (without the lock, keeping its place): the
  // manager retires idle spares there, which may have been made since the wait began.
  Result<Lease> acquire(BudgetClaim claim, std::stop_token stop, std::chrono::steady_clock::time_point deadline,
                        const std::function<void()>& meanwhile = {},
                        std::chrono::milliseconds every = std::chrono::milliseconds(200));

  // False when the claim is bigger than a whole ceiling: no amount of waiting helps.
  bool could_ever_fit(const BudgetClaim& claim) const {
    return claim.memory_mb <= c_.memory_mb && claim.pids <= c_.pids && c_.max_sandboxes > 0;
  }

  // Disk: the reserve for the filesystem holding `path`, and whether it still holds.
  std::uint64_t reserve_bytes_for(const std::string& path) const;
  Result<void> check_free_space(const std::string& path, std::string_view what) const;

  const HostCeilings& ceilings() const { return c_; }
  nlohmann::json report() const;

 private:
  bool fits(const BudgetClaim& c) const;  // under mu_
  std::string refusal(const BudgetClaim& c) const;  // under mu_
  void give_back(const BudgetClaim& c);
  void take(const BudgetClaim& c);  // under mu_
  void serve_waiters();             // under mu_

  // One per blocked acquire. A give_back that frees room hands it to the waiters at the front
  // directly: waking all of them to re-check (a burst of a hundred sandboxes queued behind the
  // pids ceiling) cost more CPU than building the sandboxes.
  struct Waiter {
    BudgetClaim claim;
    bool granted = false;
    std::condition_variable_any cv;
  };

  HostCeilings c_;
  mutable std::mutex mu_;
  std::list<Waiter*> waiting_;
  std::size_t live_ = 0;
  std::uint64_t memory_mb_ = 0, pids_ = 0;
};

// Free bytes for unprivileged users on the filesystem holding `path` (statvfs f_bavail).
std::optional<std::uint64_t> free_bytes(const std::string& path);
// Whether two paths live on one filesystem (st_dev).
bool same_filesystem(const std::string& a, const std::string& b);

}  // namespace kiln::sandbox
