// A run while it runs: reading its output without blocking, enforcing wall time and the output cap
// from outside, killing the whole tree, and turning its end into the result the tools return.
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
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

constexpr std::size_t kMaxProgressPending = 64 * 1024;
constexpr auto kDrainAfterExit = std::chrono::milliseconds(150);

// Every writer of the run's output pipes is gone (the command and whatever it started closed
// them): only what is already in the pipes is left to read.
bool pipes_hung_up(const Run& run) {
  pollfd p[2];
  nfds_t n = 0;
  for (const auto* pipe : {&run.out_pipe, &run.err_pipe})
    if (*pipe) p[n++] = pollfd{(*pipe)->native_handle(), POLLIN, 0};
  if (::poll(p, n, 0) < 0) return false;
  for (nfds_t i = 0; i < n; ++i)
    if (!(p[i].revents & (POLLHUP | POLLERR))) return false;
  return true;
}

}  // namespace

void SandboxManager::Impl::read_pipe(const std::shared_ptr<Run>& run, bool is_err) {
  auto& pipe = is_err ? run->err_pipe : run->out_pipe;
  auto& buf = is_err ? run->err_buf : run->out_buf;
  if (!pipe) return;
  auto self = shared_from_this();
  pipe->async_read_some(asio::buffer(buf), [self, run, is_err](boost::system::error_code ec, std::size_t n) {
    auto& buf = is_err ? run->err_buf : run->out_buf;
    if (n > 0) self->on_output(run, is_err, std::string_view(buf.data(), n));
    if (ec) {
      auto& p = is_err ? run->err_pipe : run->out_pipe;
      if (p) {
        boost::system::error_code ignore;
        p->close(ignore);
        p.reset();
        --run->open_pipes;
      }
      self->maybe_finish(run);
      return;
    }
    self->read_pipe(run, is_err);
  });
}

void SandboxManager::Impl::on_output(const std::shared_ptr<Run>& run, bool is_err, std::string_view data) {
  const std::uint64_t cap = run->limits.output_bytes.value_or(~0ull);
  std::string_view keep = data;
  std::uint64_t dropped = 0;
  if (run->raw_bytes >= cap) {
    keep = {};
    dropped = data.size();
  } else if (run->raw_bytes + data.size() > cap) {
    keep = data.substr(0, std::size_t(cap - run->raw_bytes));
    dropped = data.size() - keep.size();
  }
  run->raw_bytes += data.size();
  auto& spool = is_err ? *run->err : *run->out;
  if (dropped) spool.add_dropped(dropped);
  if (!keep.empty()) {
    // Without secrets to hide the chunk goes out as it came: no copy per chunk.
    StreamRedactor& redactor = *(is_err ? run->rerr : run->rout);
    std::string redacted;
    if (!redactor.passthrough()) redacted = redactor.feed(keep);
    std::string_view text = redactor.passthrough() ? keep : std::string_view(redacted);
    if (!text.empty()) {
      spool.append(text);
      run->both->append(is_err, text);
      if (run->req.live_output) run->req.live_output(is_err, text);
      std::lock_guard lock(run->mu);
      if (run->req.want_progress) {
        run->progress += text;
        if (run->progress.size() > kMaxProgressPending) {
          std::size_t cut = run->progress.size() - kMaxProgressPending;
          run->progress_skipped += cut;
          run->progress.erase(0, cut);
        }
      }
      ++run->version;
      run->cv.notify_all();
    }
  }
  if (dropped && !run->req.long_lived) terminate(run, StopReason::output_limit);
}

void SandboxManager::Impl::terminate(const std::shared_ptr<Run>& run, StopReason why, int sig) {
  {
    std::lock_guard lock(run->mu);
    if (run->finished) return;
    if (sig == SIGKILL) {
      if (run->pending && *run->pending != StopReason::setup_failed) return;  // first reason wins
      run->pending = why;
    }
  }
  auto sb = run->sandbox.lock();
  if (sb && sb->unsandboxed) {
    if (run->host_pid > 0) ::kill(-run->host_pid, sig);
    if (sig == SIGKILL && run->cg) run->cg->kill_all();
    return;
  }
  if (!sb) return;
  if (sig == SIGKILL && sb->fresh) {
    // pid 1 of the sandbox: killing it takes every process of the pid namespace with it.
    if (sb->helper_pid > 0 && !sb->helper_gone) kill_helper(*sb);
    return;
  }
  if (sb->control) send_control(sb->control_fd, json{{"op", "kill"}, {"id", run->exec_id}, {"signal", sig}});
  if (sig == SIGKILL && run->cg) run->cg->kill_all();
}

void SandboxManager::Impl::on_exited(const std::shared_ptr<Run>& run, std::optional<int> code, int sig,
                                     std::uint64_t user_ms, std::uint64_t sys_ms, std::uint64_t maxrss_kb) {
  {
    std::lock_guard lock(run->mu);
    if (run->exited) return;
    run->exited = true;
    run->started = true;
    run->exit_code = code;
    run->signal = sig;
    run->user_ms = user_ms;
    run->sys_ms = sys_ms;
    run->maxrss_kb = maxrss_kb;
    run->t_end = Clock::now();
    ++run->version;
    run->cv.notify_all();
  }
  auto sb = run->sandbox.lock();
  if (sb && sb->fresh && !sb->unsandboxed && !sb->closing && sb->helper_pid > 0 && !sb->helper_gone) {
    // A fresh sandbox ends with its command: pid 1 dies and takes any leftover (background)
    // process along, which also closes their copies of the output pipes. When nothing holds
    // them any more, the sandbox's clean-up after the result (retire_sandbox) is soon enough:
    // the namespaces' tear-down then does not compete with the result for the CPU.
    if (!pipes_hung_up(*run)) kill_helper(*sb);
  } else if (run->open_pipes > 0) {
    // Something the command started (a server with `&`) may keep the pipes open forever:
    // collect what is in flight, then stop reading.
    run->drain_timer = std::make_unique<asio::steady_timer>(io);
    run->drain_timer->expires_after(kDrainAfterExit);
    auto self = shared_from_this();
    run->drain_timer->async_wait([self, run](boost::system::error_code ec) {
      if (ec) return;
      for (auto* p : {&run->out_pipe, &run->err_pipe}) {
        if (*p) {
          boost::system::error_code ignore;
          (*p)->cancel(ignore);
        }
      }
    });
  }
  maybe_finish(run);
}

void SandboxManager::Impl::maybe_finish(const std::shared_ptr<Run>& run) {
  {
    std::lock_guard lock(run->mu);
    if (!run->exited || run->finished || run->open_pipes > 0) return;
  }
  finish(run);
}

void SandboxManager::Impl::finish(const std::shared_ptr<Run>& run) {
  for (bool is_err : {false, true}) {
    std::string rest = (is_err ? run->rerr : run->rout)->finish();
    if (!rest.empty()) {
      (is_err ? run->err : run->out)->append(rest);
      run->both->append(is_err, rest);
      if (run->req.live_output) run->req.live_output(is_err, rest);
      std::lock_guard lock(run->mu);
      if (run->req.want_progress) run->progress += rest;
    }
  }
  for (auto* t : {&run->wall_timer, &run->drain_timer, &run->cpu_timer, &run->disk_timer})
    if (*t) (*t)->cancel();
  run->cpu_timer_tick.reset();
  run->disk_timer_tick.reset();
  auto sb = run->sandbox.lock();
  CgroupUsage after;
  bool have_usage = false;
  if (sb && sb->cg) {
    after = sb->cg->usage();
    have_usage = true;
  }
  std::unique_lock lock(run->mu);
  if (run->stdin_fd >= 0) ::close(std::exchange(run->stdin_fd, -1));
  const auto& l = run->limits;
  bool oom = have_usage && after.oom_kills > run->cg_before.oom_kills;
  bool pids_hit = have_usage && after.pids_max_events > run->cg_before.pids_max_events;
  if (oom || run->pending == StopReason::memory_limit) run->limits_hit.push_back("memory_mb");
  if (pids_hit) run->limits_hit.push_back("pids");
  if (run->out->dropped() + run->err->dropped() > 0) run->limits_hit.push_back("output_bytes");
  if (run->signal == SIGXFSZ) run->limits_hit.push_back("file_size_mb");
  const double cpu_ms = double(run->user_ms + run->sys_ms);
  bool cpu_hit = run->signal == SIGXCPU || run->pending == StopReason::cpu_limit ||
                 // unsandboxed runs get equal soft and hard limits (SIGKILL), and under load the kernel's
                 // tick-sampled CPU time runs up to ~10% ahead of what wait4 reports
                 (l.cpu_s && run->signal == SIGKILL && cpu_ms >= *l.cpu_s * 1000 * 0.85);
  if (cpu_hit) run->limits_hit.push_back("cpu_s");
  if (run->pending) run->reason = *run->pending;
  else if (oom) run->reason = StopReason::memory_limit;
  else if (cpu_hit) run->reason = StopReason::cpu_limit;
  else if (pids_hit && (run->signal || run->exit_code.value_or(0) != 0)) run->reason = StopReason::pids_limit;
  else if (run->signal) run->reason = StopReason::signal;
  else run->reason = StopReason::exit;
  if (run->pending == StopReason::timeout) run->limits_hit.push_back("wall_s");
  // Peak memory: the group's high-water mark when the group is this exec's alone, else the
  // largest single process (rusage).
  if (sb && sb->fresh && have_usage && after.memory_peak_bytes) {
    run->peak_bytes = after.memory_peak_bytes;
    run->peak_source = sb->cg->version() == CgroupVersion::v2 ? "cgroup v2 memory.peak (whole sandbox)"
                                                              : "cgroup v1 memory.max_usage_in_bytes (whole sandbox)";
  } else if (run->maxrss_kb) {
    run->peak_bytes = run->maxrss_kb * 1024;
    run->peak_source = "rusage maxrss (largest single process)";
  }
  if (run->t_end == Clock::time_point{}) run->t_end = Clock::now();
  if (run->req.on_finished) {
    lock.unlock();
    auto on_finished = std::move(run->req.on_finished);
    on_finished(result_of(run, sb));
    lock.lock();
  }
  run->finished = true;
  ++run->version;
  run->cv.notify_all();
  // The waiting caller has its result now; the group clean-up below is not on its path.
  lock.unlock();
  // The caller is usually woken onto this CPU (the waker's), where it would wait behind the work
  // below (the trace's end: a SQLite commit) while the answer is due: let it run first. A no-op
  // when nothing else is runnable here.
  ::sched_yield();
  if (auto after = std::move(run->req.after_result)) after();
  if (sb) sb->execs.erase(run->exec_id);
  // The last kMaxFinishedRuns runs stay findable; their pipes are closed (open_pipes is 0 here),
  // so the 2 x 64 KiB read buffers go now rather than stay with each of them (~128 MB at the cap).
  std::vector<char>().swap(run->out_buf);
  std::vector<char>().swap(run->err_buf);
  if (run->cg) {
    run->cg->kill_all(5);
    // An emptied per-exec group goes back to its sandbox for the next exec (no rmdir + mkdir per
    // exec); the sandbox's own clean-up removes it with the rest.
    bool pooled = false;
    if (sb && !sb->closing && !sb->unsandboxed && run->cg->empty()) {
      std::lock_guard ml(mu);
      if (sb->exec_cg_pool.size() < 4) {
        sb->exec_cg_pool.push_back(std::move(*run->cg));
        pooled = true;
      }
    }
    if (!pooled) {
      std::vector<std::string> a, b;
      run->cg->remove(a, b);
    }
    run->cg.reset();
  }
  {
    std::lock_guard ml(mu);
    finished_runs.push_back(run->id);
    while (finished_runs.size() > kMaxFinishedRuns) {
      runs.erase(finished_runs.front());
      finished_runs.pop_front();
    }
  }
  if (sb && sb->respawn) want_spare(*sb->respawn);
  if (sb && sb->fresh && !sb->closing) {
    auto cb = std::move(run->req.on_sandbox_cleanup);
    retire_sandbox(sb, [cb](CleanupReport r) {
      if (cb) cb(r);
    });
  }
}

ExecResult SandboxManager::Impl::result_of(const std::shared_ptr<Run>& run, const std::shared_ptr<Sandbox>& sb) const {
  ExecResult r;
  std::lock_guard lock(run->mu);
  r.run_id = run->id;
  r.sandbox_id = run->sandbox_id;
  r.fresh_sandbox = sb && sb->fresh;
  r.exit_code = run->exit_code;
  r.signal = run->signal;
  r.stop_reason = run->reason;
  r.duration_precise_ms = std::chrono::duration<double, std::milli>(run->t_end - run->t_start).count();
  r.duration_ms = std::int64_t(r.duration_precise_ms + 0.5);
  r.out = run->out->tail(run->req.tail_bytes);
  r.err = run->err->tail(run->req.tail_bytes);
  r.peak_memory_bytes = run->peak_bytes;
  r.peak_memory_source = run->peak_source;
  r.user_ms = run->user_ms;
  r.sys_ms = run->sys_ms;
  r.limits_hit = run->limits_hit;
  r.run_dir = run->run_dir;
  if (run->netlog) {
    r.network_log = run->netlog->to_json();
    r.network_summary = run->netlog->summary_json();
  }
  for (int err : {run->out->write_error(), run->err->write_error(), run->both->write_error()}) {
    if (err == 0 || !r.output_error.empty()) continue;
    r.output_error = err == ENOSPC || err == EDQUOT
                         ? fmt::format("the state directory is full: the output could not be saved in {} ({}), "
                                       "so only its last bytes were kept",
                                       run->run_dir, std::strerror(err))
                         : fmt::format("the output could not be saved in {} ({}), so only its last bytes were kept",
                                       run->run_dir, std::strerror(err));
  }
  if (sb) {
    r.isolation = sb->isolation;
    r.warning = sb->warning;
  }
  return r;
}

void SandboxManager::Impl::wait_finished(const std::shared_ptr<Run>& run, std::stop_token stop,
                                         const OutputObserver& observer) {
  auto self = shared_from_this();
  std::stop_callback on_cancel(stop, [self, run] {
    asio::post(self->io, [self, run] { self->terminate(run, StopReason::cancelled); });
  });
  // The progress value is the bytes streamed so far, counted here: the spools' sizes can run
  // ahead of the text handed over, and a value that does not grow would drop that text (MCP
  // progress must increase).
  std::uint64_t streamed = 0;
  auto flush = [&](std::unique_lock<std::mutex>& lock) {
    if (!observer || run->progress.empty()) return;
    std::string text = std::move(run->progress);
    run->progress.clear();
    std::size_t cut = utf8_incomplete_tail(text);
    if (cut && !run->finished) {
      run->progress = text.substr(text.size() - cut);
      text.resize(text.size() - cut);
    }
    std::uint64_t skipped = std::exchange(run->progress_skipped, 0);
    streamed += skipped + text.size();
    lock.unlock();
    if (skipped) text = fmt::format("[... {} bytes not streamed; read them with process_output ...]\n", skipped) + text;
    if (!text.empty()) observer(streamed, sanitize_utf8(text));
    lock.lock();
  };
  std::unique_lock lock(run->mu);
  while (!run->finished) {
    run->cv.wait_for(lock, std::chrono::milliseconds(observer ? 50 : 500));
    flush(lock);
  }
  flush(lock);
}

}  // namespace kiln::sandbox
