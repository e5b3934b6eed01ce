// Runs: starting a command in a sandbox (helper exec op, or a plain child for isolation none) with
// its spool, pipes and limits. What happens while it runs is manager_run_events.cpp; the calls the
// tools make on runs are manager_run_calls.cpp.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
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

constexpr std::size_t kKeepTail = 64 * 1024;  // bytes of each stream kept in memory

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
  // The folder and each stream's file are made by the spool when the stream's first byte
  // arrives, off the start of the run (most short commands leave them empty).
  run->run_dir = !req.run_dir.empty() ? req.run_dir : opt.state_dir + "/runs/" + run->id;
  run->out = std::make_unique<OutputSpool>(run->run_dir + "/stdout", kKeepTail);
  run->err = std::make_unique<OutputSpool>(run->run_dir + "/stderr", kKeepTail);
  run->both = std::make_unique<CombinedOutput>(run->run_dir + "/output", 16 * 1024, *run->out, *run->err);
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
  std::vector<int> cg_procs;  // unsandboxed: the files through which the child joins its groups
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
        // v1: the `tasks` file, since the vfork child is single-threaded and a thread moving itself
        // there skips the kernel's global lock and its RCU wait (core/cgroup_join.h).
        std::vector<std::string> files;
        const char* join = sb->cg->version() == CgroupVersion::v1 ? "/tasks" : "/cgroup.procs";
        if (sb->cg->version() == CgroupVersion::v1) {
          for (const char* c : {"memory", "cpuacct"})
            if (sb->cg->has(c)) files.push_back(sb->cg->dir_of(c) + join);
        }
        files.push_back(run->cg->kill_dir() + join);
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
  // A fresh sandbox's group has held nothing but the sandbox's own setup: no OOM kill, no pids.max
  // event, so its counters start at zero and need no reads on the way to the command. Its CPU
  // time is not zero (the setup ran in it), which cpu_s must not count.
  if (sb->cg && (!sb->fresh || run->limits.cpu_s)) run->cg_before = sb->cg->usage();

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

  if (req.before_start) {
    if (auto ready = req.before_start(); !ready) {
      if (run->cg) {
        std::vector<std::string> a, b;
        run->cg->remove(a, b);
      }
      return std::unexpected(ready.error());
    }
  }
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
        watch_unsandboxed_exit(run);
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
      if (sb->egress) {
        // pid 1 opens this exec's proxy port and sets the proxy variables; what comes in on it is
        // logged here. Logs of ended execs stay while their leftover processes may still connect,
        // the oldest ended one going past a bound: a running exec's log (an app's web process,
        // under hundreds of schedule runs) is never the one dropped.
        m["egress"] = true;
        run->netlog = std::make_shared<egress::NetworkLog>();
        sb->egress_logs[run->exec_id] = run->netlog;
        while (sb->egress_logs.size() > 256) {
          auto victim = std::find_if(sb->egress_logs.begin(), sb->egress_logs.end(),
                                     [&](const auto& e) { return !sb->execs.contains(e.first); });
          sb->egress_logs.erase(victim != sb->egress_logs.end() ? victim : sb->egress_logs.begin());
        }
      }
      if (auto h = env.find("HOME"); h != env.end() && h->second.size() > 1 && h->second[0] == '/' &&
                                     h->second.size() < 4096 && h->second.find('\0') == std::string::npos)
        m["home"] = h->second;
      std::vector<int> fds = {in_r.get(), out_w.get(), err_w.get()};
      if (cg_fd.get() >= 0) fds.push_back(cg_fd.get());
      if (!send_control(sb->control_fd, m, fds)) {
        const int err = errno;
        sb->execs.erase(run->exec_id);
        // A request larger than the socket's send buffer (~200 KB: a huge argv or environment)
        // cannot be one message; the sandbox itself is fine.
        if (err == EMSGSIZE)
          *setup_error = Error{Errc::invalid_argument,
                               fmt::format("the command, its environment and working folder come to {} bytes, more "
                                           "than one exec request can carry (about 200 KB): write the long part to "
                                           "a file in the workspace and run that, or pass data through stdin",
                                           m.dump().size())};
        else
          *setup_error = Error{Errc::not_found, fmt::format("sandbox {} stopped answering (its helper is gone)", sb->id)};
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
    watch_disk(run, sb->policy);
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


// The wait can end before the command has exited (a readiness the pidfd does not have, seen for
// helpers under load): reaping without blocking, and waiting again when there is nothing to reap,
// keeps the event loop from blocking until this command ends.
void SandboxManager::Impl::watch_unsandboxed_exit(const std::shared_ptr<Run>& run) {
  auto self = shared_from_this();
  run->pidfd->async_wait(asio::posix::stream_descriptor::wait_read, [self, run](boost::system::error_code ec) {
    if (ec) return;
    int status = 0;
    rusage ru{};
    pid_t r = ::wait4(run->host_pid, &status, WNOHANG, &ru);
    if (r == 0) return self->watch_unsandboxed_exit(run);
    if (r < 0) return;
    std::optional<int> code;
    int sig = 0;
    if (WIFEXITED(status)) code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) sig = WTERMSIG(status);
    self->on_exited(run, code, sig, std::uint64_t(ru.ru_utime.tv_sec) * 1000 + std::uint64_t(ru.ru_utime.tv_usec) / 1000,
                    std::uint64_t(ru.ru_stime.tv_sec) * 1000 + std::uint64_t(ru.ru_stime.tv_usec) / 1000,
                    std::uint64_t(ru.ru_maxrss));
  });
}

}  // namespace kiln::sandbox
