// Admission of sandboxes against the server-wide ceilings, and the free-space reserve. Limits
// are counted as claimed (a memory limit is what a sandbox may take, so the sum of limits is what
// all of them may take together), never as measured, so admission cannot be raced by a burst.
#include "sandbox/host_budget.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <fmt/format.h>

namespace kiln::sandbox {

namespace {

std::uint64_t mem_total_mb() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  std::uint64_t kb = 0;
  std::string unit;
  while (in >> key >> kb >> unit)
    if (key == "MemTotal:") return std::max<std::uint64_t>(kb / 1024, 1024);
  long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0) return std::max<std::uint64_t>(std::uint64_t(pages) * std::uint64_t(page) >> 20, 1024);
  return 8192;
}

std::uint64_t read_number(const char* path, std::uint64_t fallback) {
  std::ifstream in(path);
  std::uint64_t v = 0;
  return (in >> v) && v > 0 ? v : fallback;
}

}  // namespace

HostCeilings host_ceilings_with_defaults(HostCeilings c) {
  if (c.max_sandboxes == 0) c.max_sandboxes = 128;
  if (c.memory_mb == 0) c.memory_mb = mem_total_mb();
  if (c.pids == 0) {
    std::uint64_t threads = read_number("/proc/sys/kernel/threads-max", 65536);
    std::uint64_t pid_max = read_number("/proc/sys/kernel/pid_max", 32768);
    c.pids = std::max<std::uint64_t>(std::min(threads, pid_max) / 2, 4096);
  }
  return c;
}

std::optional<std::uint64_t> free_bytes(const std::string& path) {
  struct statvfs sv {};
  if (::statvfs(path.c_str(), &sv) != 0) return std::nullopt;
  return std::uint64_t(sv.f_bavail) * std::uint64_t(sv.f_frsize);
}

bool same_filesystem(const std::string& a, const std::string& b) {
  struct stat sa {}, sb {};
  return ::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev;
}

void HostBudget::Lease::release() {
  if (budget_) std::exchange(budget_, nullptr)->give_back(claim_);
}

HostBudget::HostBudget(HostCeilings ceilings) : c_(host_ceilings_with_defaults(ceilings)) {}

bool HostBudget::fits(const BudgetClaim& c) const {
  return live_ + 1 <= c_.max_sandboxes && memory_mb_ + c.memory_mb <= c_.memory_mb && pids_ + c.pids <= c_.pids;
}

std::string HostBudget::refusal(const BudgetClaim& c) const {
  std::string what;
  if (live_ + 1 > c_.max_sandboxes) what = fmt::format("{} sandboxes are live, the most this server allows", live_);
  else if (memory_mb_ + c.memory_mb > c_.memory_mb)
    what = fmt::format("live sandboxes' memory limits already add up to {} MiB of the {} MiB this server allows, and "
                       "this one asks for {} MiB",
                       memory_mb_, c_.memory_mb, c.memory_mb);
  else if (pids_ + c.pids > c_.pids)
    what = fmt::format("live sandboxes' process limits already add up to {} of the {} this server allows, and this "
                       "one asks for {}",
                       pids_, c_.pids, c.pids);
  else
    what = fmt::format("{} other request{} already waiting for room", waiting_.size(),
                       waiting_.size() == 1 ? " is" : "s are");
  return fmt::format("no room for another sandbox: {}. Destroy sandboxes you no longer need (sandbox_list, "
                     "sandbox_destroy), ask for smaller limits.memory_mb / limits.pids, or start kiln with higher "
                     "--max-sandboxes / --max-sandbox-memory-mb / --max-sandbox-pids",
                     what);
}

void HostBudget::take(const BudgetClaim& c) {
  ++live_;
  memory_mb_ += c.memory_mb;
  pids_ += c.pids;
}

void HostBudget::serve_waiters() {
  // In order: a large claim at the front is not starved by smaller ones arriving after it.
  while (!waiting_.empty() && fits(waiting_.front()->claim)) {
    Waiter* w = waiting_.front();
    waiting_.pop_front();
    take(w->claim);
    w->granted = true;
    w->cv.notify_one();
  }
}

Result<HostBudget::Lease> HostBudget::try_acquire(BudgetClaim claim) {
  std::lock_guard lock(mu_);
  if (!waiting_.empty() || !fits(claim)) return fail(Errc::too_large, refusal(claim));
  take(claim);
  return Lease(this, claim);
}

Result<HostBudget::Lease> HostBudget::acquire(BudgetClaim claim, std::stop_token stop,
                                              std::chrono::steady_clock::time_point deadline,
                                              const std::function<void()>& meanwhile, std::chrono::milliseconds every) {
  std::unique_lock lock(mu_);
  if (!could_ever_fit(claim)) return fail(Errc::too_large, refusal(claim));
  if (waiting_.empty() && fits(claim)) {
    take(claim);
    return Lease(this, claim);
  }
  Waiter w{claim};
  // In the queue from here until granted or given up, whatever way this returns.
  struct Place {
    HostBudget& b;
    Waiter& w;
    std::list<Waiter*>::iterator at;
    bool queued = true;
    void leave() {
      if (w.granted || !queued) return;
      queued = false;
      b.waiting_.erase(at);
      b.serve_waiters();  // it may have been the one holding the others back
    }
    ~Place() { leave(); }
  } place{*this, w, waiting_.insert(waiting_.end(), &w)};
  for (;;) {
    const auto until = meanwhile ? std::min(deadline, std::chrono::steady_clock::now() + every) : deadline;
    w.cv.wait_until(lock, stop, until, [&] { return w.granted; });
    // Granted counts even if it came with the deadline or the stop.
    if (w.granted || stop.stop_requested() || std::chrono::steady_clock::now() >= deadline) break;
    lock.unlock();
    try {
      meanwhile();
    } catch (...) {
      lock.lock();  // the queue is left under the lock (Place)
      throw;
    }
    lock.lock();
  }
  if (w.granted) return Lease(this, claim);
  place.leave();  // before the refusal, which counts those still waiting
  if (stop.stop_requested()) return fail(Errc::cancelled, "cancelled while waiting for room for a sandbox");
  return fail(Errc::too_large, refusal(claim));
}

void HostBudget::give_back(const BudgetClaim& c) {
  std::lock_guard lock(mu_);
  live_ -= std::min<std::size_t>(live_, 1);
  memory_mb_ -= std::min(memory_mb_, c.memory_mb);
  pids_ -= std::min(pids_, c.pids);
  serve_waiters();
}

std::uint64_t HostBudget::reserve_bytes_for(const std::string& path) const {
  if (c_.disk_reserve_mb) return c_.disk_reserve_mb << 20;
  struct statvfs sv {};
  if (::statvfs(path.c_str(), &sv) != 0) return 0;
  std::uint64_t size = std::uint64_t(sv.f_blocks) * std::uint64_t(sv.f_frsize);
  return std::min<std::uint64_t>(2048ull << 20, size / 20);
}

Result<void> HostBudget::check_free_space(const std::string& path, std::string_view what) const {
  auto free = free_bytes(path);
  if (!free) return {};  // a filesystem we cannot measure is not refused for it
  std::uint64_t reserve = reserve_bytes_for(path);
  if (*free >= reserve) return {};
  return fail(Errc::too_large,
              fmt::format("not starting: the filesystem holding {} has {} MiB free, below the {} MiB that kiln keeps "
                          "free for the host. Free some space (delete build output, old traces with kiln traces, "
                          "artifacts) or start kiln with a smaller --disk-reserve-mb",
                          what, *free >> 20, reserve >> 20));
}

nlohmann::json HostBudget::report() const {
  std::lock_guard lock(mu_);
  return {{"max_sandboxes", c_.max_sandboxes}, {"live_sandboxes", live_}, {"waiting", waiting_.size()},
          {"memory_mb", {{"ceiling", c_.memory_mb}, {"claimed", memory_mb_}}},
          {"pids", {{"ceiling", c_.pids}, {"claimed", pids_}}},
          {"disk_reserve_mb", c_.disk_reserve_mb ? nlohmann::json(c_.disk_reserve_mb) : nlohmann::json("min(2048, 5% of the filesystem)")}};
}

}  // namespace kiln::sandbox
