// The calls the tools make on runs: exec and start (picking or making the sandbox), long-poll
// output, stdin and kill.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>

#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <fmt/format.h>

#include "core/fd_io.h"
#include "core/unique_fd.h"
#include "sandbox/helper_link.h"
#include "sandbox/manager_impl.h"
#include "sandbox/policy.h"
#include "sandbox/spawn.h"


namespace kiln::sandbox {

using nlohmann::json;

namespace {

// `spares`: whether a warm spare may be taken (not on the retry after a spare that failed).
Result<std::shared_ptr<Sandbox>> pick_sandbox(SandboxManager::Impl& impl, const std::string& id,
                                              const SandboxPolicy* fresh, const std::string& owner,
                                              std::stop_token stop, bool spares = true) {
  if (!id.empty()) {
    auto sb = impl.find_sandbox_of(id, owner);
    if (!sb || sb->closing)
      return fail(Errc::not_found, fmt::format("no live sandbox '{}': create one with sandbox_create (sandboxes are "
                                               "reaped after being idle), or omit sandbox_id to run in a fresh one",
                                               id));
    return sb;
  }
  if (!fresh) return fail(Errc::invalid_argument, "no sandbox_id and no policy for a fresh sandbox");
  if (fresh->owner != owner) return fail(Errc::internal, "a fresh sandbox's policy names another owner than the request");
  // Once this exec is done (not now: building competes with it for the CPU), a spare is warmed
  // for the next fresh exec with this policy.
  if (auto sb = spares ? impl.take_spare(*fresh) : nullptr) {
    sb->respawn = *fresh;
    return sb;
  }
  // Spares wait while a fresh exec builds its own (sandbox/spare_pool.cpp).
  struct ColdBuild {
    SandboxManager::Impl& impl;
    explicit ColdBuild(SandboxManager::Impl& i) : impl(i) { ++impl.cold_builds; }
    ~ColdBuild() {
      --impl.cold_builds;
      impl.spare_cv.notify_all();
    }
  } cold{impl};
  auto made = impl.make_sandbox(*fresh, true, stop, SandboxManager::Impl::Admission::wait);
  if (made) (*made)->respawn = *fresh;
  return made;
}

struct Launched {
  std::shared_ptr<Sandbox> sandbox;
  std::shared_ptr<Run> run;
};

// Picks (or makes) the sandbox and starts the request in it; a fresh sandbox whose launch failed
// is destroyed at once, since nothing else will ever use it.
Result<Launched> pick_and_launch(SandboxManager& manager, SandboxManager::Impl& impl, const std::string& id,
                                 const SandboxPolicy* fresh, ExecRequest req, std::stop_token stop) {
  auto sb = pick_sandbox(impl, id, fresh, req.owner, stop);
  if (!sb) return std::unexpected(sb.error());
  // A spare whose helper died a moment ago (not yet noticed when it was taken) refuses the run as
  // gone: the caller never knew that sandbox, so its request goes to a cold one instead.
  std::optional<ExecRequest> again;
  if (id.empty()) again = req;
  auto run = impl.launch(*sb, std::move(req));
  if (!run && id.empty() && run.error().code == Errc::not_found) {
    (void)manager.destroy((*sb)->policy.owner, (*sb)->id);
    sb = pick_sandbox(impl, id, fresh, again->owner, stop, false);
    if (!sb) return std::unexpected(sb.error());
    run = impl.launch(*sb, std::move(*again));
  }
  if (!run) {
    if ((*sb)->fresh) (void)manager.destroy((*sb)->policy.owner, (*sb)->id);
    return std::unexpected(run.error());
  }
  return Launched{std::move(*sb), std::move(*run)};
}

}  // namespace

Result<ExecResult> SandboxManager::exec(const std::string& sandbox_id, const SandboxPolicy* fresh_policy,
                                        ExecRequest req, std::stop_token stop, OutputObserver observer) {
  req.background = false;
  if (observer) req.want_progress = true;
  auto launched = pick_and_launch(*this, *impl_, sandbox_id, fresh_policy, std::move(req), stop);
  if (!launched) return std::unexpected(launched.error());
  auto sb = &launched->sandbox;
  auto run = &launched->run;
  impl_->wait_finished(*run, stop, observer);
  {
    std::lock_guard lock((*run)->mu);
    if ((*run)->start_error) return std::unexpected(*(*run)->start_error);
  }
  {
    std::lock_guard lock(impl_->mu);
    (*sb)->last_used = Clock::now();
  }
  return impl_->result_of(*run, *sb);
}

Result<BackgroundStarted> SandboxManager::start(const std::string& sandbox_id, const SandboxPolicy* fresh_policy,
                                                ExecRequest req, std::stop_token stop) {
  req.background = true;
  auto launched = pick_and_launch(*this, *impl_, sandbox_id, fresh_policy, std::move(req), stop);
  if (!launched) return std::unexpected(launched.error());
  auto sb = &launched->sandbox;
  auto run = &launched->run;
  auto& r = **run;
  std::unique_lock lock(r.mu);
  r.cv.wait_for(lock, std::chrono::seconds(10), [&] { return r.started || r.finished || r.start_error; });
  if (r.start_error) return std::unexpected(*r.start_error);
  return BackgroundStarted{r.id, r.sandbox_id, r.pid, r.run_dir, (*sb)->isolation, (*sb)->warning};
}

Result<OutputPage> SandboxManager::output(const std::string& owner, const std::string& run_id, Stream stream,
                                          std::uint64_t offset, std::size_t limit, int wait_ms, std::stop_token stop) {
  auto run = impl_->find_run_of(run_id, owner);
  if (!run)
    return fail(Errc::not_found, fmt::format("unknown run_id '{}': use a run_id returned by sandbox_exec (the "
                                             "server keeps the last {} runs)",
                                             run_id, kMaxFinishedRuns));
  const OutputSpool* one = stream == Stream::stdout_ ? run->out.get() : stream == Stream::stderr_ ? run->err.get() : nullptr;
  auto spool_size = [&] { return one ? one->size() : run->both->size(); };
  auto deadline = Clock::now() + std::chrono::milliseconds(std::max(0, wait_ms));
  {
    std::unique_lock lock(run->mu);
    while (spool_size() <= offset && !run->finished && !stop.stop_requested() && Clock::now() < deadline) {
      auto left = deadline - Clock::now();
      run->cv.wait_for(lock, std::min<Clock::duration>(left, std::chrono::milliseconds(50)));
    }
  }
  if (auto sb = impl_->find_sandbox(run->sandbox_id)) {
    std::lock_guard lock(impl_->mu);
    sb->last_used = Clock::now();
  }
  OutputPage page;
  page.offset = offset;
  std::string raw = one ? one->read(offset, limit) : run->both->read(offset, limit);
  std::lock_guard lock(run->mu);
  page.total_bytes = spool_size();
  std::size_t cut = (offset + raw.size() < page.total_bytes || !run->finished) ? utf8_incomplete_tail(raw) : 0;
  if (cut == raw.size()) cut = 0;  // a lone partial sequence: hand it out replaced
  raw.resize(raw.size() - cut);
  page.data = sanitize_utf8(raw);
  page.next_offset = offset + raw.size();
  page.running = !run->finished;
  page.eof = run->finished && page.next_offset >= page.total_bytes;
  if (run->finished) {
    page.exit_code = run->exit_code;
    page.signal = run->signal;
    page.stop_reason = run->reason;
  }
  return page;
}

Result<std::size_t> SandboxManager::input(const std::string& owner, const std::string& run_id, std::string_view data,
                                          bool close) {
  auto run = impl_->find_run_of(run_id, owner);
  if (!run) return fail(Errc::not_found, fmt::format("unknown run_id '{}'", run_id));
  std::lock_guard lock(run->mu);
  if (run->stdin_fd < 0) {
    return fail(Errc::conflict,
                fmt::format("stdin of {} is closed: the command {}", run_id,
                            run->finished ? "has ended" : "was started without an open stdin (use background: true) or it was closed"));
  }
  std::size_t written = 0;
  auto deadline = Clock::now() + std::chrono::seconds(5);
  while (written < data.size()) {
    ssize_t n = write_some(run->stdin_fd, data.data() + written, data.size() - written);
    if (n > 0) {
      written += std::size_t(n);
      continue;
    }
    if (n < 0 && errno == EAGAIN && Clock::now() < deadline && !run->finished) {
      pollfd p{run->stdin_fd, POLLOUT, 0};
      ::poll(&p, 1, 20);
      continue;
    }
    if (n < 0 && errno == EPIPE) {
      ::close(std::exchange(run->stdin_fd, -1));
      if (written == 0) return fail(Errc::conflict, fmt::format("the command of {} closed its stdin", run_id));
    }
    break;
  }
  if (close && run->stdin_fd >= 0) ::close(std::exchange(run->stdin_fd, -1));
  return written;
}

Result<std::optional<StopReason>> SandboxManager::kill(const std::string& owner, const std::string& run_id, int sig) {
  auto run = impl_->find_run_of(run_id, owner);
  if (!run) return fail(Errc::not_found, fmt::format("unknown run_id '{}'", run_id));
  {
    std::lock_guard lock(run->mu);
    if (run->finished) return std::optional<StopReason>(run->reason);
  }
  asio::post(impl_->io, [impl = impl_, run, sig] { impl->terminate(run, StopReason::killed, sig); });
  std::unique_lock lock(run->mu);
  run->cv.wait_for(lock, std::chrono::milliseconds(sig == SIGKILL ? 3000 : 1000), [&] { return run->finished; });
  if (run->finished) return std::optional<StopReason>(run->reason);
  return std::optional<StopReason>();
}

}  // namespace kiln::sandbox
