// Runs: starting a command in a sandbox (helper exec op, or a plain child for isolation none),
// reading its output without blocking, enforcing wall time and the output cap from outside,
// killing the whole tree, and the results, long-poll output, stdin and kill the tools expose.
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

constexpr std::size_t kKeepTail = 64 * 1024;       // bytes of each stream kept in memory
constexpr std::size_t kMaxProgressPending = 64 * 1024;
constexpr std::size_t kMaxFinishedRuns = 1000;
constexpr auto kDrainAfterExit = std::chrono::milliseconds(150);

// HOME (/tmp/home) lives on the sandbox's private /tmp, which starts empty: make it on first use.
// `[ -d ]` is a shell builtin, so the common case costs nothing.
constexpr const char* kHomePrefix = "[ -d \"$HOME\" ] || mkdir -p \"$HOME\" 2>/dev/null; ";

}  // namespace

Result<std::shared_ptr<Run>> SandboxManager::Impl::launch(const std::shared_ptr<Sandbox>& sb, ExecRequest req) {
  if (req.argv.empty()) return fail(Errc::invalid_argument, "command is empty");
  if (auto disk = check_disk_before(sb->policy); !disk) return std::unexpected(disk.error());
  auto run = std::make_shared<Run>();
  run->id = random_id("run_", 10);
  run->sandbox_id = sb->id;
  run->owner = sb->policy.owner;
  run->sandbox = sb;
  run->redactor = sb->redactor;
  run->limits = sb->policy.limits;
  bool have_dir;
  if (!req.run_dir.empty()) {
    run->run_dir = req.run_dir;
    struct stat st {};
    have_dir = ::stat(run->run_dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
  } else {
    run->run_dir = opt.state_dir + "/runs/" + run->id;
    have_dir = ::mkdir(run->run_dir.c_str(), 0700) == 0;
  }
  run->out = std::make_unique<OutputSpool>(have_dir ? run->run_dir + "/stdout" : "", kKeepTail);
  run->err = std::make_unique<OutputSpool>(have_dir ? run->run_dir + "/stderr" : "", kKeepTail);
  run->both = std::make_unique<OutputSpool>(have_dir ? run->run_dir + "/output" : "", 16 * 1024);
  run->rout = std::make_unique<StreamRedactor>(sb->redactor);
  run->rerr = std::make_unique<StreamRedactor>(sb->redactor);

  auto env = sb->env;
  for (const auto& [k, v] : req.env) env[k] = v;
  // argv: the command as given (one exec, no shell in front); the helper's exec child creates
  // HOME (it lives on the sandbox's private /tmp, which starts empty) just before it. Isolation
  // none (no helper) keeps the tiny shell prefix that creates it on first use.
  std::vector<std::string> argv;
  const bool is_sh_c = req.argv.size() == 3 && req.argv[0] == "/bin/sh" && req.argv[1] == "-c";
  if (!sb->unsandboxed) {
    argv = req.argv;
    // Without `sh` in front, a program that cannot be executed is reported by the helper; it is
    // turned into the shell's answer (exit 127/126 and a line on stderr), as before.
    run->direct_exec = !is_sh_c;
  } else if (is_sh_c) {
    argv = {"/bin/sh", "-c", std::string(kHomePrefix) + req.argv[2]};
  } else {
    argv = {"/bin/sh", "-c", std::string(kHomePrefix) + "exec \"$@\"", "sh"};
    argv.insert(argv.end(), req.argv.begin(), req.argv.end());
  }

  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return fail(Errc::io, fmt::format("pipe: {}", std::strerror(errno)));
  UniqueFd out_r(p[0]), out_w(p[1]);
  if (::pipe2(p, O_CLOEXEC) != 0) return fail(Errc::io, fmt::format("pipe: {}", std::strerror(errno)));
  UniqueFd err_r(p[0]), err_w(p[1]);
  UniqueFd in_r, in_w;
  if (req.stdin_data || req.background) {
    if (::pipe2(p, O_CLOEXEC) != 0) return fail(Errc::io, fmt::format("pipe: {}", std::strerror(errno)));
    in_r = UniqueFd(p[0]);
    in_w = UniqueFd(p[1]);
    ::fcntl(in_w.get(), F_SETFL, ::fcntl(in_w.get(), F_GETFL) | O_NONBLOCK);
    // Writing to a command that exited must fail with EPIPE, not kill the server.
    ::signal(SIGPIPE, SIG_IGN);
  } else {
    in_r = UniqueFd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  }

  // A per-exec group in session sandboxes, so a timeout or kill reaches every process of this
  // exec (setsid and double forks included) and nothing of the others.
  UniqueFd cg_fd;
  std::vector<int> cg_procs;  // unsandboxed: cgroup.procs files the child joins
  std::vector<UniqueFd> cg_keep;
  if (sb->cg && (!sb->fresh || sb->unsandboxed)) {
    std::optional<CgroupSet> pooled;
    if (!sb->unsandboxed) {
      std::lock_guard lock(mu);
      if (!sb->exec_cg_pool.empty()) {
        pooled = std::move(sb->exec_cg_pool.back());
        sb->exec_cg_pool.pop_back();
      }
    }
    // A pooled group is only reused while it is still empty (nothing of an earlier exec in it).
    if (pooled && !pooled->empty()) {
      std::vector<std::string> a, b;
      pooled->remove(a, b);
      pooled.reset();
    }
    if (auto child = pooled ? Result<CgroupSet>(std::move(*pooled)) : sb->cg->child(run->id)) {
      run->cg = std::move(*child);
      if (sb->unsandboxed) {
        std::vector<std::string> files;
        if (sb->cg->version() == CgroupVersion::v1) {
          for (const char* c : {"memory", "cpuacct"})
            if (sb->cg->has(c)) files.push_back(sb->cg->dir_of(c) + "/cgroup.procs");
        }
        files.push_back(run->cg->kill_dir() + "/cgroup.procs");
        for (const auto& f : files) {
          UniqueFd fd(::open(f.c_str(), O_WRONLY | O_CLOEXEC));
          if (fd.get() >= 0) {
            cg_procs.push_back(fd.get());
            cg_keep.push_back(std::move(fd));
          }
        }
      } else {
        cg_fd = UniqueFd(::open(run->cg->kill_dir().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
      }
    }
  }
  if (sb->cg) run->cg_before = sb->cg->usage();

  const Limits& l = run->limits;
  json rlimits = json::object();
  rlimits["nofile"] = 4096;
  if (l.cpu_s) rlimits["cpu_s"] = std::uint64_t(std::ceil(*l.cpu_s));
  if (l.file_size_mb) rlimits["file_size_mb"] = *l.file_size_mb;
  // Without a cgroup, memory and pids fall back to rlimits (the isolation report says so).
  const bool cg_mem = sb->cg && (sb->cg->has("memory") || sb->cg->has("unified"));
  const bool cg_pid = sb->cg && (sb->cg->has("pids") || sb->cg->has("unified"));
  // RLIMIT_AS only when asked for explicitly: as a default it would break programs that reserve
  // address space (JVMs, Go, sanitizers, V8).
  if (l.memory_mb && !cg_mem && sb->policy.requested.memory_mb) rlimits["as_mb"] = *l.memory_mb;
  if (l.pids && !cg_pid) rlimits["nproc"] = *l.pids;

  run->req = std::move(req);
  run->out_buf.resize(64 * 1024);
  run->err_buf.resize(64 * 1024);
  {
    std::lock_guard lock(mu);
    runs[run->id] = run;
    sb->last_used = Clock::now();
  }
  if (run->req.background || run->req.stdin_data) {
    std::lock_guard lock(run->mu);
    run->stdin_fd = in_w.release();
  }

  auto setup_error = std::make_shared<std::optional<Error>>();
  on_io([&]() -> int {
    run->out_pipe = std::make_unique<asio::posix::stream_descriptor>(io, out_r.release());
    run->err_pipe = std::make_unique<asio::posix::stream_descriptor>(io, err_r.release());
    run->open_pipes = 2;
    run->t_start = Clock::now();
    if (sb->unsandboxed) {
      SpawnSpec s;
      s.path = "/bin/sh";
      s.argv = argv;
      s.env = env_strings(env);
      s.fds = {{0, in_r.get()}, {1, out_w.get()}, {2, err_w.get()}};
      s.cwd = run->req.cwd;
      s.setsid = true;
      s.pdeathsig = true;
      s.cgroup_procs_fds = cg_procs;
      if (l.cpu_s) s.rlimits.push_back({RLIMIT_CPU, rlim_t(std::ceil(*l.cpu_s))});
      if (l.file_size_mb) s.rlimits.push_back({RLIMIT_FSIZE, rlim_t(*l.file_size_mb) << 20});
      if (l.memory_mb && !cg_mem) s.rlimits.push_back({RLIMIT_AS, rlim_t(*l.memory_mb) << 20});
      if (l.pids && !cg_pid) s.rlimits.push_back({RLIMIT_NPROC, rlim_t(*l.pids)});
      auto pid = spawn_process(s);
      if (!pid) {
        *setup_error = Error{Errc::invalid_argument, pid.error().message};
        return 0;
      }
      run->host_pid = *pid;
      int pfd = open_pidfd(*pid);
      {
        std::lock_guard lock(run->mu);
        run->started = true;
        run->pid = *pid;
      }
      if (pfd >= 0) {
        run->pidfd = std::make_unique<asio::posix::stream_descriptor>(io, pfd);
        auto self = shared_from_this();
        run->pidfd->async_wait(asio::posix::stream_descriptor::wait_read, [self, run](boost::system::error_code ec) {
          if (ec) return;
          int status = 0;
          rusage ru{};
          if (::wait4(run->host_pid, &status, 0, &ru) <= 0) return;
          std::optional<int> code;
          int sig = 0;
          if (WIFEXITED(status)) code = WEXITSTATUS(status);
          if (WIFSIGNALED(status)) sig = WTERMSIG(status);
          self->on_exited(run, code, sig, std::uint64_t(ru.ru_utime.tv_sec) * 1000 + std::uint64_t(ru.ru_utime.tv_usec) / 1000,
                          std::uint64_t(ru.ru_stime.tv_sec) * 1000 + std::uint64_t(ru.ru_stime.tv_usec) / 1000,
                          std::uint64_t(ru.ru_maxrss));
        });
      }
    } else {
      if (sb->closing || !sb->control) {
        *setup_error = Error{Errc::not_found, fmt::format("sandbox {} is gone (destroyed, reaped or its helper died)", sb->id)};
        return 0;
      }
      run->exec_id = sb->next_exec++;
      sb->execs[run->exec_id] = run;
      json m = {{"op", "exec"}, {"id", run->exec_id}, {"argv", argv}, {"env", env}, {"cwd", run->req.cwd},
                {"rlimits", rlimits}, {"setsid", true}};
      // The whole exec tree's CPU, metered by pid 1: RLIMIT_CPU alone is per process.
      if (l.cpu_s) m["cpu_ms"] = std::uint64_t(std::ceil(*l.cpu_s * 1000));
      // Without a memory cgroup, pid 1 meters the sandbox's resident memory instead.
      if (l.memory_mb && !cg_mem) m["memory_mb"] = *l.memory_mb;
      if (auto h = env.find("HOME"); h != env.end() && h->second.size() > 1 && h->second[0] == '/' &&
                                     h->second.size() < 4096 && h->second.find('\0') == std::string::npos)
        m["home"] = h->second;
      std::vector<int> fds = {in_r.get(), out_w.get(), err_w.get()};
      if (cg_fd.get() >= 0) fds.push_back(cg_fd.get());
      if (!send_control(sb->control_fd, m, fds)) {
        sb->execs.erase(run->exec_id);
        *setup_error = Error{Errc::io, fmt::format("sandbox {} stopped answering (its helper is gone)", sb->id)};
        return 0;
      }
    }
    read_pipe(run, false);
    read_pipe(run, true);
    // Wall time: the call's timeout_s, else the policy's wall_s (background runs only when asked).
    std::optional<double> wall = run->req.timeout_s;
    if (!wall && !run->req.background) wall = l.wall_s;
    if (wall) {
      run->wall_timer = std::make_unique<asio::steady_timer>(io);
      run->wall_timer->expires_after(std::chrono::microseconds(std::int64_t(*wall * 1e6)));
      auto self = shared_from_this();
      run->wall_timer->async_wait([self, run](boost::system::error_code ec) {
        if (!ec) self->terminate(run, StopReason::timeout);
      });
    }
    // Whole-tree CPU time, polled from outside, where the group belongs to this exec alone.
    if (l.cpu_s && sb->cg && sb->fresh && sb->cg->usage().cpu_ns) {
      run->cpu_timer = std::make_unique<asio::steady_timer>(io);
      auto self = shared_from_this();
      auto budget = std::uint64_t(*l.cpu_s * 1e9);
      auto tick = std::make_shared<std::function<void()>>();
      std::weak_ptr<std::function<void()>> weak_tick = tick;
      *tick = [self, run, sb, budget, weak_tick] {
        run->cpu_timer->expires_after(std::chrono::milliseconds(100));
        run->cpu_timer->async_wait([self, run, sb, budget, weak_tick](boost::system::error_code ec) {
          if (ec || !sb->cg) return;
          auto u = sb->cg->usage();
          if (u.cpu_ns && *u.cpu_ns - run->cg_before.cpu_ns.value_or(0) >= budget) {
            self->terminate(run, StopReason::cpu_limit);
            return;
          }
          if (auto t = weak_tick.lock()) (*t)();
        });
      };
      run->cpu_timer_tick = tick;
      (*tick)();
    }
    watch_disk(run, sb->policy.workspace_root);
    // stdin given as data: written from the loop, then closed (foreground) so the command sees EOF.
    if (run->req.stdin_data && !run->req.stdin_data->empty()) {
      int wfd;
      {
        std::lock_guard lock(run->mu);
        wfd = ::dup(run->stdin_fd);
      }
      auto d = std::make_shared<asio::posix::stream_descriptor>(io, wfd);
      auto data = std::make_shared<std::string>(*run->req.stdin_data);
      asio::async_write(*d, asio::buffer(*data), [run, d, data](boost::system::error_code, std::size_t) {
        boost::system::error_code ignore;
        d->close(ignore);
        if (!run->req.background) {
          std::lock_guard lock(run->mu);
          if (run->stdin_fd >= 0) ::close(std::exchange(run->stdin_fd, -1));
        }
      });
    } else if (run->req.stdin_data && !run->req.background) {
      std::lock_guard lock(run->mu);
      if (run->stdin_fd >= 0) ::close(std::exchange(run->stdin_fd, -1));
    }
    return 0;
  });
  if (*setup_error) {
    std::lock_guard lock(mu);
    runs.erase(run->id);
    if (run->cg) {
      std::vector<std::string> a, b;
      run->cg->remove(a, b);
    }
    return std::unexpected(**setup_error);
  }
  return run;
}

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
    std::string text = (is_err ? run->rerr : run->rout)->feed(keep);
    if (!text.empty()) {
      spool.append(text);
      run->both->append(text);
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
  if (dropped) terminate(run, StopReason::output_limit);
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
    if (sb->helper_pid > 0 && !sb->helper_gone) ::kill(sb->helper_pid, SIGKILL);
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
    // process along, which also closes their copies of the output pipes.
    ::kill(sb->helper_pid, SIGKILL);
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
      run->both->append(rest);
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
  for (const auto* spool : {run->out.get(), run->err.get(), run->both.get()}) {
    int err = spool ? spool->write_error() : 0;
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

namespace {

Result<std::shared_ptr<Sandbox>> pick_sandbox(SandboxManager::Impl& impl, const std::string& id,
                                              const SandboxPolicy* fresh, const std::string& owner,
                                              std::stop_token stop) {
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
  auto sb = impl.take_spare(*fresh);
  auto made = sb ? Result<std::shared_ptr<Sandbox>>(sb)
                 : impl.make_sandbox(*fresh, true, stop, SandboxManager::Impl::Admission::wait);
  // Once this exec is done (not now: building competes with it for the CPU), a spare is warmed
  // for the next fresh exec with this policy.
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
  auto run = impl.launch(*sb, std::move(req));
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
  OutputSpool& spool = stream == Stream::stdout_ ? *run->out : stream == Stream::stderr_ ? *run->err : *run->both;
  auto deadline = Clock::now() + std::chrono::milliseconds(std::max(0, wait_ms));
  {
    std::unique_lock lock(run->mu);
    while (spool.size() <= offset && !run->finished && !stop.stop_requested() && Clock::now() < deadline) {
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
  std::string raw = spool.read(offset, limit);
  std::lock_guard lock(run->mu);
  page.total_bytes = spool.size();
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
