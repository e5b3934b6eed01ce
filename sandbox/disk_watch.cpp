// The disk budget of a run, enforced from outside the sandbox: the free space of the workspace's
// filesystem is polled on the manager's loop, and the whole tree is killed when the run has filled
// more than limits.disk_mb of it or when it falls below the server's reserve. Counting free space
// (not files) sees every byte wherever it goes in the workspace, at the price of also counting
// other writers to the same filesystem: a run is sometimes stopped early, never allowed more.
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

void SandboxManager::Impl::watch_disk(const std::shared_ptr<Run>& run, const std::string& workspace_root) {
  auto free0 = free_bytes(workspace_root);
  if (!free0) return;
  const std::uint64_t budget_bytes = run->limits.disk_mb.value_or(0) << 20;
  const std::uint64_t reserve = budget.reserve_bytes_for(workspace_root);
  // The run's own kept output lands in the state directory; when that shares the filesystem it is
  // the server's writing (capped by output_bytes), not the command's.
  const bool output_here = same_filesystem(workspace_root, opt.state_dir);
  run->disk_timer = std::make_unique<asio::steady_timer>(io);
  auto self = shared_from_this();
  auto tick = std::make_shared<std::function<void()>>();
  std::weak_ptr<std::function<void()>> weak_tick = tick;
  *tick = [self, run, weak_tick, root = workspace_root, start = *free0, budget_bytes, reserve, output_here] {
    run->disk_timer->expires_after(kDiskPoll);
    run->disk_timer->async_wait([=](boost::system::error_code ec) {
      if (ec) return;
      auto now = free_bytes(root);
      if (now) {
        std::uint64_t ours = output_here ? run->out->size() + run->err->size() + run->both->size() : 0;
        std::uint64_t filled = start > *now ? start - *now : 0;
        filled = filled > ours ? filled - ours : 0;
        const char* hit = budget_bytes && filled > budget_bytes ? "disk_mb" : *now < reserve ? "disk_reserve" : nullptr;
        if (hit) {
          {
            std::lock_guard lock(run->mu);
            run->limits_hit.push_back(hit);
          }
          self->terminate(run, StopReason::disk_limit);
          return;
        }
      }
      if (auto t = weak_tick.lock()) (*t)();
    });
  };
  run->disk_timer_tick = tick;
  (*tick)();
}

}  // namespace kiln::sandbox
