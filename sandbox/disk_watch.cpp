// The disk budget of a run, enforced from outside the sandbox: the free space of the workspace's
// filesystem (and of its service data folders') is polled on the manager's loop, and the whole
// tree is killed when the run has filled more than limits.disk_mb of it or when it falls below the
// server's reserve. Counting free space (not files) sees every byte wherever it goes in the
// workspace, at the price of also counting other writers to the same filesystem: a run is
// sometimes stopped early, never allowed more.
#include <algorithm>

#include <fmt/format.h>

#include "sandbox/manager_impl.h"

namespace kiln::sandbox {

namespace {
constexpr auto kDiskPoll = std::chrono::milliseconds(100);  // statvfs is a microsecond; a fast writer is not
}

Result<void> SandboxManager::Impl::check_disk_before(const SandboxPolicy& p) const {
  if (auto r = budget.check_free_space(p.workspace_root, "the workspace " + p.workspace_root); !r) return r;
  return budget.check_free_space(opt.state_dir, "Kiln's state directory " + opt.state_dir);
}

void SandboxManager::Impl::watch_disk(const std::shared_ptr<Run>& run, const SandboxPolicy& policy) {
  // Every filesystem the run can write to: the workspace's, and that of each service data folder
  // (in Kiln's state directory, which may be another disk). disk_mb is their sum; the reserve holds
  // on each.
  struct Watched {
    std::string path;
    std::uint64_t start, reserve;
    bool output_here;  // the run's own kept output lands here (the state directory's filesystem)
  };
  std::vector<Watched> watched;
  std::vector<std::string> paths{policy.workspace_root};
  for (const auto& b : policy.data_binds) paths.push_back(b.source);
  for (const auto& p : paths) {
    if (std::any_of(watched.begin(), watched.end(), [&](const Watched& w) { return same_filesystem(w.path, p); }))
      continue;
    auto free0 = free_bytes(p);
    if (!free0) continue;
    watched.push_back({p, *free0, budget.reserve_bytes_for(p), same_filesystem(p, opt.state_dir)});
  }
  if (watched.empty()) return;
  const std::uint64_t budget_bytes = run->req.long_lived ? 0 : run->limits.disk_mb.value_or(0) << 20;
  run->disk_timer = std::make_unique<asio::steady_timer>(io);
  auto self = shared_from_this();
  auto tick = std::make_shared<std::function<void()>>();
  std::weak_ptr<std::function<void()>> weak_tick = tick;
  *tick = [self, run, weak_tick, watched = std::move(watched), budget_bytes] {
    run->disk_timer->expires_after(kDiskPoll);
    run->disk_timer->async_wait([=](boost::system::error_code ec) {
      if (ec) return;
      std::uint64_t filled_all = 0;
      bool below_reserve = false;
      for (const auto& w : watched) {
        auto now = free_bytes(w.path);
        if (!now) continue;
        std::uint64_t ours = w.output_here ? run->out->size() + run->err->size() + run->both->bytes_on_disk() : 0;
        std::uint64_t filled = w.start > *now ? w.start - *now : 0;
        filled_all += filled > ours ? filled - ours : 0;
        below_reserve = below_reserve || *now < w.reserve;
      }
      const char* hit = budget_bytes && filled_all > budget_bytes ? "disk_mb" : below_reserve ? "disk_reserve" : nullptr;
      if (hit) {
        {
          std::lock_guard lock(run->mu);
          run->limits_hit.push_back(hit);
        }
        self->terminate(run, StopReason::disk_limit);
        return;
      }
      if (auto t = weak_tick.lock()) (*t)();
    });
  };
  run->disk_timer_tick = tick;
  (*tick)();
}

}  // namespace kiln::sandbox
