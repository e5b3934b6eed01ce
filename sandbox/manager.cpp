// SandboxManager: lifecycle of sandboxes (create, list, destroy, idle reaping, shutdown), the
// helper's control channel, and the isolation report. Runs live in manager_runs.cpp.
#include "sandbox/manager_impl.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include <boost/asio/post.hpp>
#include <fmt/format.h>

#include "sandbox/helper_link.h"
#include "sandbox/policy.h"

namespace kiln::sandbox {

using nlohmann::json;

std::string random_id(const char* prefix, std::size_t bytes) {
  unsigned char buf[32];
  bytes = std::min<std::size_t>(bytes, sizeof buf);
  std::size_t got = 0;
  while (got < bytes) {
    ssize_t n = ::getrandom(buf + got, bytes - got, 0);
    if (n > 0) got += std::size_t(n);
  }
  std::string out = prefix;
  for (std::size_t i = 0; i < bytes; ++i) out += fmt::format("{:02x}", buf[i]);
  return out;
}

int parse_signal(const std::string& in) {
  std::string s = in;
  for (auto& c : s) c = char(std::toupper(static_cast<unsigned char>(c)));
  if (s.starts_with("SIG")) s = s.substr(3);
  static const std::pair<const char*, int> table[] = {
      {"KILL", SIGKILL}, {"TERM", SIGTERM}, {"INT", SIGINT}, {"HUP", SIGHUP}, {"QUIT", SIGQUIT},
      {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"STOP", SIGSTOP}, {"CONT", SIGCONT}, {"ALRM", SIGALRM}};
  for (auto& [n, v] : table)
    if (s == n) return v;
  if (!s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
    int v = std::stoi(s);
    return v > 0 && v < 65 ? v : 0;
  }
  return 0;
}

const char* signal_name(int sig) {
  switch (sig) {
    case SIGKILL: return "SIGKILL";
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGHUP: return "SIGHUP";
    case SIGQUIT: return "SIGQUIT";
    case SIGSEGV: return "SIGSEGV";
    case SIGABRT: return "SIGABRT";
    case SIGXCPU: return "SIGXCPU";
    case SIGXFSZ: return "SIGXFSZ";
    case SIGPIPE: return "SIGPIPE";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    case SIGUSR1: return "SIGUSR1";
    case SIGUSR2: return "SIGUSR2";
    case SIGALRM: return "SIGALRM";
    default: return "signal";
  }
}

namespace {
// The ceiling file was checked when the command line was read; if it cannot be read now, nothing
// is allowed (fail closed) rather than everything.
ManagerOptions with_network_ceiling(ManagerOptions o) {
  if (!o.network_ceiling && !o.ceilings.network_allow_file.empty()) {
    auto p = egress::load_policy_file(o.ceilings.network_allow_file);
    o.network_ceiling = p ? std::move(*p) : egress::Policy{};
  }
  return o;
}
}  // namespace

SandboxManager::Impl::Impl(ManagerOptions o) : opt(with_network_ceiling(std::move(o))), secrets(opt.state_dir) {}

SandboxManager::SandboxManager(ManagerOptions options) : impl_(std::make_shared<Impl>(std::move(options))) {
  impl_->cg = detect_cgroups();
  if (impl_->opt.cleanup_stale && impl_->cg.version != CgroupVersion::none) cleanup_stale_cgroups(impl_->cg);
  ::mkdir((impl_->opt.state_dir + "/runs").c_str(), 0700);
  // One forking helper per manager (HELPER_PROTOCOL.md, "Zygote"). KILN_SANDBOX_ZYGOTE=0 exec's
  // every helper instead, as kiln did before (for comparison, or a host that refuses it).
  const char* z = std::getenv("KILN_SANDBOX_ZYGOTE");
  if (impl_->opt.zygote && !impl_->opt.helper_path.empty() && !(z != nullptr && std::string_view(z) == "0"))
    impl_->zygote = std::make_unique<HelperZygote>(impl_->opt.helper_path);
  impl_->reaper = std::make_unique<asio::steady_timer>(impl_->io);
  impl_->thread = std::thread([impl = impl_.get()] {
    // Process signals (SIGTERM, SIGINT) belong to whoever waits for them (the stdio transport's
    // sigwait thread, `kiln run`); delivered here they would kill the server unhandled.
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, nullptr);
    // The event loop never dies of a stray exception from a handler: log-free, just go on.
    for (;;) {
      try {
        impl->io.run();
        break;
      } catch (...) {
      }
    }
  });
  asio::post(impl_->io, [impl = impl_.get()] { impl->arm_reaper(); });
}

SandboxManager::~SandboxManager() {
  shutdown();
  impl_->work.reset();
  impl_->io.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
  impl_->io.shutdown();
}

const ManagerOptions& SandboxManager::options() const { return impl_->opt; }

void SandboxManager::shutdown() {
  if (impl_->stopped.exchange(true)) return;
  impl_->stop_spares();
  std::vector<std::pair<std::string, std::string>> ids;  // owner, id
  {
    std::lock_guard lock(impl_->mu);
    for (auto& [id, sb] : impl_->sandboxes) ids.emplace_back(sb->policy.owner, id);
  }
  for (const auto& [owner, id] : ids) (void)destroy(owner, id);
}

std::shared_ptr<Run> SandboxManager::Impl::find_run(const std::string& id) const {
  std::lock_guard lock(mu);
  auto it = runs.find(id);
  return it == runs.end() ? nullptr : it->second;
}

std::shared_ptr<Sandbox> SandboxManager::Impl::find_sandbox(const std::string& id) const {
  std::lock_guard lock(mu);
  auto it = sandboxes.find(id);
  return it == sandboxes.end() ? nullptr : it->second;
}

std::shared_ptr<Run> SandboxManager::Impl::find_run_of(const std::string& id, const std::string& owner) const {
  auto run = find_run(id);
  return run && run->owner == owner ? run : nullptr;
}

std::shared_ptr<Sandbox> SandboxManager::Impl::find_sandbox_of(const std::string& id, const std::string& owner) const {
  std::lock_guard lock(mu);
  auto it = sandboxes.find(id);
  // An idle spare is nobody's sandbox yet: addressed by its id, an exec would run in it and leave
  // its traces for the fresh exec that takes it next.
  if (it == sandboxes.end() || it->second->spare || it->second->policy.owner != owner) return nullptr;
  return it->second;
}

namespace {

// The service data folders a sandbox has read-write, for its isolation report.
std::string data_binds_text(const SandboxPolicy& p) {
  std::string out;
  for (const auto& b : p.data_binds) out += "; " + b.target + " read-write (service data)";
  if (p.hosts_services && ::getuid() == 0) out += "; ids inside 65534 (services refuse root)";
  return out;
}

// RLIMIT_NPROC is counted per (user namespace, uid) since Linux 5.14 (ucounts); before, it
// counted every process of the uid on the host, which makes it useless as a sandbox default.
bool nproc_counted_per_user_namespace() {
  struct utsname u {};
  if (::uname(&u) != 0) return false;
  int major = 0, minor = 0;
  if (std::sscanf(u.release, "%d.%d", &major, &minor) != 2) return false;
  return major > 5 || (major == 5 && minor >= 14);
}

bool cg_memory(const CgroupLayout& l) { return l.bases.contains("memory") || l.bases.contains("unified"); }
bool cg_pids(const CgroupLayout& l) { return l.bases.contains("pids") || l.bases.contains("unified"); }
const char* cg_name(const CgroupLayout& l) { return l.version == CgroupVersion::v2 ? "cgroup v2" : "cgroup v1"; }

json limits_report(const SandboxPolicy& p, const CgroupLayout& cg, bool have_cg) {
  json out = json::object();
  const Limits& l = p.limits;
  auto entry = [](auto value, std::string how, const char* scope) {
    return json{{"value", value}, {"enforced_by", std::move(how)}, {"scope", scope}};
  };
  if (l.wall_s) out["wall_s"] = entry(*l.wall_s, "kiln (timer outside the sandbox; kills the whole tree)", "each exec");
  if (l.output_bytes)
    out["output_bytes"] = entry(*l.output_bytes, "kiln (counts stdout+stderr outside the sandbox; kills the tree)", "each exec");
  if (l.memory_mb) {
    if (have_cg && cg_memory(cg))
      out["memory_mb"] = entry(*l.memory_mb, fmt::format("{} memory limit, OOM kill inside the group", cg_name(cg)), "whole sandbox");
    else if (p.isolation == Isolation::none)
      out["memory_mb"] = entry(*l.memory_mb, "rlimit RLIMIT_AS (virtual memory, per process)", "each process");
    else
      out["memory_mb"] = entry(*l.memory_mb,
                               p.requested.memory_mb
                                   ? "the sandbox's pid 1 meters resident memory (anonymous + shared) of all its "
                                     "processes every 100 ms and kills the largest exec over the limit; plus rlimit "
                                     "RLIMIT_AS (virtual memory) per process"
                                   : "the sandbox's pid 1 meters resident memory (anonymous + shared) of all its "
                                     "processes every 100 ms and kills the largest exec over the limit",
                               "whole sandbox");
  }
  if (l.pids) {
    if (have_cg && cg_pids(cg))
      out["pids"] = entry(*l.pids, fmt::format("{} pids.max", cg_name(cg)), "whole sandbox");
    else if (p.isolation == Isolation::none)
      out["pids"] = entry(*l.pids, "rlimit RLIMIT_NPROC (counts every process of this user)", "per user");
    else
      out["pids"] = entry(*l.pids,
                          "rlimit RLIMIT_NPROC, counted per user namespace (Linux 5.14+): the sandbox's own processes",
                          "whole sandbox");
  }
  if (l.cpu_s) {
    if (p.isolation == Isolation::none)
      out["cpu_s"] = entry(*l.cpu_s, "rlimit RLIMIT_CPU (per process)", "each process");
    else
      out["cpu_s"] = entry(*l.cpu_s,
                           "the sandbox's pid 1 meters the CPU of each exec's whole process tree every 100 ms "
                           "(live processes and what their reaped children used) and kills the tree at the budget; "
                           "plus rlimit RLIMIT_CPU per process",
                           "each exec (whole tree)");
  }
  if (l.file_size_mb) out["file_size_mb"] = entry(*l.file_size_mb, "rlimit RLIMIT_FSIZE", "each process");
  if (l.disk_mb)
    out["disk_mb"] = entry(*l.disk_mb,
                           "kiln (free space of the workspace's filesystem, polled outside the sandbox every 100 ms; "
                           "the tree is killed when it shrank by more, or fell below the server's reserve; other "
                           "writers to that filesystem count too)",
                           "each exec");
  return out;
}

}  // namespace

Result<void> SandboxManager::finalize_policy(SandboxPolicy& p) const {
  if (p.isolation == Isolation::none && !impl_->opt.allow_unsandboxed) {
    return fail(Errc::invalid_argument,
                "isolation \"none\" would run the command directly on the host, unsandboxed; it is only allowed "
                "when the server was started with `kiln mcp --allow-unsandboxed`. Use isolation \"strict\" (the "
                "default).");
  }
  const auto& cg = impl_->cg;
  if (p.requested.pids && !cg_pids(cg) && ::geteuid() == 0) {
    return fail(Errc::unsupported,
                fmt::format("limits.pids cannot be enforced here: no writable pids cgroup ({}) and root is exempt "
                            "from RLIMIT_NPROC. Drop limits.pids or give Kiln a writable cgroup.",
                            cg.why_none.empty() ? "pids controller missing" : cg.why_none));
  }
  p.limits = p.requested;
  // Without cgroups: memory is metered by the sandbox's pid 1, and RLIMIT_NPROC counts the
  // sandbox's own processes on kernels that count it per user namespace (root is exempt from it).
  const bool unsandboxed = p.isolation == Isolation::none;
  apply_default_limits(p.limits, cg_memory(cg) || !unsandboxed,
                       cg_pids(cg) || (!unsandboxed && ::geteuid() != 0 && nproc_counted_per_user_namespace()));
  // The values are learnt now, before anything about the run is recorded: a trace is started
  // before its sandbox is built, and what it stores (command, cwd) must already be redacted.
  // A name that does not resolve is reported when the sandbox is made.
  if (auto values = impl_->secrets.resolve(p.secrets)) {
    std::lock_guard lock(impl_->mu);
    for (const auto& [k, v] : *values) impl_->all_secrets.add(k, v);
  }
  return {};
}

Result<HostBudget::Lease> SandboxManager::Impl::admit(const SandboxPolicy& policy, Admission how,
                                                      std::stop_token stop) {
  // A limit left unset is counted at the default a cgroup would get: unlimited must not mean free.
  BudgetClaim claim{policy.limits.memory_mb.value_or(2048), policy.limits.pids.value_or(1024)};
  auto got = budget.try_acquire(claim);
  if (got || how == Admission::spare) return got;
  // Idle spares give way to real requests (also one finished while we wait), and a fresh sandbox
  // whose exec has just answered is gone a moment later. So even a session sandbox, which is
  // refused rather than queued, waits the few seconds a clean-up takes before being refused.
  const auto patience = how == Admission::wait ? std::chrono::duration<double>(policy.limits.wall_s.value_or(600))
                                               : std::chrono::duration<double>(3);
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(patience);
  // One place in the queue for the whole wait; every 200 ms the idle spares are retired again
  // (a spare whose build had its room before this request came may have finished since).
  auto give_way = [this] {
    bool idle_spares;
    {
      std::lock_guard lock(mu);
      idle_spares = !spares.empty();
    }
    if (idle_spares) retire_all_spares();
  };
  give_way();
  got = budget.acquire(claim, stop, deadline, give_way);
  if (!got && got.error().code == Errc::too_large && how == Admission::wait)
    got.error().message += fmt::format(" (waited {:.0f} s for room, the run's wall time)", patience.count());
  return got;
}

Result<std::shared_ptr<Sandbox>> SandboxManager::Impl::make_sandbox(SandboxPolicy policy, bool fresh,
                                                                   std::stop_token stop, Admission how) {
  if (stopped) return fail(Errc::cancelled, "the server is shutting down");
  if (policy.network == Network::allowlist && policy.isolation == Isolation::none)
    return fail(Errc::unsupported, "a network allowlist needs isolation \"strict\": without a sandbox the command "
                                   "has the host's whole network and nothing can hold it to the list");
  if (policy.network == Network::host && opt.network_ceiling)
    return fail(Errc::invalid_argument,
                "this server was started with --network-allow, so network \"host\" is refused; ask for an allowlist "
                "within it instead, e.g. \"network\": {\"allow\": [\"registry.npmjs.org\"]}");
  if (policy.network == Network::allowlist && !policy.egress)
    return fail(Errc::internal, "network allowlist without a policy");
  if (policy.workspace_readonly && policy.isolation == Isolation::none)
    return fail(Errc::unsupported, "a read-only workspace needs isolation \"strict\": without a sandbox nothing can "
                                   "keep the command from writing to it");
  auto lease = admit(policy, how, stop);
  if (!lease) return std::unexpected(lease.error());
  auto sb = std::make_shared<Sandbox>();
  sb->lease = std::move(*lease);
  sb->id = random_id("sb_", 12);
  sb->fresh = fresh;
  sb->unsandboxed = policy.isolation == Isolation::none;
  auto values = secrets.resolve(policy.secrets);
  if (!values) return std::unexpected(values.error());
  auto red = std::make_shared<Redactor>(*values);
  {
    std::lock_guard lock(mu);
    for (const auto& [k, v] : *values) all_secrets.add(k, v);
  }
  sb->redactor = red;
  sb->env = sandbox_env(policy, *values);

  const bool want_cg = cg.version != CgroupVersion::none;
  if (want_cg) {
    // A v1 cpuacct group is read only to hold a fresh sandbox's exec to cpu_s (the whole tree's
    // CPU) and for unsandboxed runs; otherwise it is a folder made and removed for nothing, and
    // one more group for the helper to join (100 sandboxes at once are bound by such CPU).
    CgroupLayout layout = cg;
    if (layout.version == CgroupVersion::v1 && !sb->unsandboxed && !policy.limits.cpu_s) layout.bases.erase("cpuacct");
    auto set = CgroupSet::create(layout, sb->id + cgroup_owner_suffix(), policy.limits);
    if (!set) {
      // A limit that only a cgroup can enforce must not be dropped silently.
      if ((policy.requested.memory_mb || policy.requested.pids) && !sb->unsandboxed)
        return fail(Errc::unsupported, set.error().message + "; cannot enforce the requested limits");
      // Defaults fall back to rlimits; the report says so.
      policy.limits.memory_mb = policy.requested.memory_mb;
      policy.limits.pids = policy.requested.pids;
    } else {
      sb->cg = std::move(*set);
      sb->cg->open_stat_files();
    }
  }
  sb->policy = std::move(policy);
  if (sb->policy.network == Network::allowlist)
    sb->egress = std::make_shared<egress::SandboxEgress>(egress::Scope{*sb->policy.egress, opt.network_ceiling, sb->policy.egress_publisher_ceiling});
  json limits = limits_report(sb->policy, cg, sb->cg.has_value());
  const auto& p = sb->policy;
  if (sb->unsandboxed) {
    sb->warning =
        "UNSANDBOXED: isolation \"none\" ran this command directly on the host as the user running kiln, "
        "with full access to their files and network. Only the timeout, output cap, limits and environment "
        "filtering applied.";
    sb->isolation = json{{"level", "none"},
                         {"warning", sb->warning},
                         {"namespaces", json::array()},
                         {"seccomp", false},
                         {"landlock", false},
                         {"no_new_privs", false},
                         {"network", "host (not isolated)"},
                         {"filesystem", "the whole host, as the user running kiln"},
                         {"env", "filtered: PATH, HOME, LANG, TERM, env and secrets only"},
                         {"limits", limits}};
  } else {
    std::vector<std::string> dirs = sb->cg ? sb->cg->dirs() : std::vector<std::string>{};
    json spec = helper_spec(p, sb->id, dirs);
    // A fresh sandbox ends with its one command: pid 1 need not keep a shepherd for a second.
    if (fresh) spec["single_exec"] = true;
    auto ident = workspace_identity(p.workspace_root);
    if (ident) {
      spec["workspace_dev"] = ident->dev;
      spec["workspace_ino"] = ident->ino;
      sb->workspace = *ident;
    }
    auto started = ident ? start_helper(opt.helper_path, spec, stop, std::chrono::seconds(20), zygote.get())
                         : Result<HelperStart>(std::unexpected(ident.error()));
    if (!started) {
      if (sb->cg) {
        std::vector<std::string> a, b;
        sb->cg->remove(a, b);
      }
      return std::unexpected(started.error());
    }
    sb->helper_pid = started->pid;
    sb->helper_is_child = started->child_of_kiln;
    sb->control_fd = started->control_fd;
    sb->setup_ms = started->ms;
    const json& rep = started->report;
    json ns = rep.contains("namespaces") ? rep["namespaces"]
                                         : json::array({"user", "mount", "pid", "ipc", "uts", "cgroup"});
    if (!rep.contains("namespaces") && p.network != Network::host) ns.push_back("net");
    sb->isolation = json{{"level", "strict"},
                         {"namespaces", ns},
                         {"seccomp", rep.value("seccomp", json(true))},
                         {"landlock", rep.value("landlock", json(nullptr))},
                         {"no_new_privs", true},
                         {"capabilities", "all dropped"},
                         {"network", p.hosts_services && p.network == Network::none
                                         ? "none (loopback up for the sandbox's services)"
                                         : to_string(p.network)},
                         {"filesystem", fmt::format("{} {}; read-only system folders; private /tmp; "
                                                    "read-only /proc with host-wide entries masked{}",
                                                    p.workspace_root, p.workspace_readonly ? "read-only" : "read-write",
                                                    data_binds_text(p))},
                         {"proc", rep.value("proc", json(nullptr))},
                         {"env", "filtered: PATH, HOME, LANG, TERM, env and secrets only"},
                         {"limits", limits},
                         {"setup_steps", started->steps},
                         {"helper_report", rep}};
    sb->isolation["helper_report"].erase("proc");  // shown once, as "proc" above: it is in every result
    if (!sb->cg && cg.version == CgroupVersion::none) sb->isolation["cgroups"] = cg.why_none;
    if (sb->egress) {
      json e = sb->egress->scope().to_json();
      e["enforced_by"] = egress::enforcement_text();
      e["proxy_env"] = "HTTP_PROXY, HTTPS_PROXY, ALL_PROXY (and lower case), npm_config_proxy, "
                       "npm_config_https_proxy, YARN_HTTP_PROXY, YARN_HTTPS_PROXY, PIP_PROXY; NO_PROXY=localhost,"
                       "127.0.0.1,::1 (the sandbox's own loopback)";
      e["direct_connections"] = "refused: the namespace has no route but loopback; UDP and DNS have nowhere to go";
      sb->isolation["egress"] = std::move(e);
    }
    int pidfd = started->pidfd;
    on_io([&] {
      sb->control = std::make_unique<asio::posix::stream_descriptor>(io, sb->control_fd);
      if (pidfd >= 0) sb->pidfd = std::make_unique<asio::posix::stream_descriptor>(io, pidfd);
      watch_control(sb);
      watch_helper_exit(sb);
      return 0;
    });
  }
  std::lock_guard lock(mu);
  sandboxes[sb->id] = sb;
  return sb;
}

Result<SandboxInfo> SandboxManager::create(SandboxPolicy policy, std::stop_token stop) {
  auto sb = impl_->make_sandbox(std::move(policy), false, stop);
  if (!sb) return std::unexpected(sb.error());
  return SandboxInfo{(*sb)->id, (*sb)->isolation, (*sb)->warning, (*sb)->setup_ms};
}

void SandboxManager::Impl::watch_control(const std::shared_ptr<Sandbox>& sb) {
  if (!sb->control) return;
  sb->control->async_wait(asio::posix::stream_descriptor::wait_read, [this, sb](boost::system::error_code ec) {
    if (ec) return;
    std::string msg;
    std::vector<UniqueFd> fds;  // whatever a message carried and nobody took is closed with it
    for (;;) {
      int r = recv_control(sb->control_fd, msg, fds);
      if (r < 0) break;
      if (r == 0) {
        helper_lost(sb);
        return;
      }
      json m = json::parse(msg, nullptr, false);
      if (m.is_object()) handle_message(sb, m, fds);
    }
    watch_control(sb);
  });
}

void SandboxManager::Impl::watch_helper_exit(const std::shared_ptr<Sandbox>& sb) {
  if (!sb->pidfd) return;
  sb->pidfd->async_wait(asio::posix::stream_descriptor::wait_read, [this, sb](boost::system::error_code ec) {
    if (ec) return;
    // The wait can end without the helper having exited (seen under load: the reactor reports a
    // readiness the pidfd does not have), so the exit is confirmed before the sandbox is given
    // up: our own child by reaping it, a zygote's child (reaped by the kernel, unknown to
    // waitpid) by its pidfd polling readable now.
    int status;
    pollfd p{sb->pidfd->native_handle(), POLLIN, 0};
    const bool exited = sb->helper_is_child ? ::waitpid(sb->helper_pid, &status, WNOHANG) != 0
                                            : ::poll(&p, 1, 0) == 1;
    if (!exited) {
      watch_helper_exit(sb);
      return;
    }
    sb->helper_gone = true;
    helper_lost(sb);
    auto cbs = std::move(sb->on_helper_gone);
    for (auto& f : cbs) f();
  });
}

void SandboxManager::Impl::kill_helper(const Sandbox& sb) {
  if (sb.pidfd) ::syscall(SYS_pidfd_send_signal, sb.pidfd->native_handle(), SIGKILL, nullptr, 0);
  else if (sb.helper_is_child && sb.helper_pid > 0) ::kill(sb.helper_pid, SIGKILL);
}

void SandboxManager::Impl::handle_message(const std::shared_ptr<Sandbox>& sb, const json& m, std::vector<UniqueFd>& fds) {
  if (connect_reply(sb, m, fds)) return;
  std::string op = m.value("op", "");
  if (op == "egress") {
    // A connection a command made to its proxy port; pid 1 accepted it inside the sandbox.
    if (fds.size() != 1 || !sb->egress) return;  // the fds close with the vector
    std::shared_ptr<egress::NetworkLog> log;
    if (m.contains("id") && m["id"].is_number_integer())
      if (auto it = sb->egress_logs.find(m["id"].get<int>()); it != sb->egress_logs.end()) log = it->second;
    {
      std::lock_guard lock(mu);
      sb->last_used = Clock::now();
    }
    egress_proxy.serve(std::move(fds[0]), sb->egress, log);
    fds.clear();
    return;
  }
  int id = m.value("id", 0);
  auto it = sb->execs.find(id);
  if (it == sb->execs.end()) return;
  auto run = it->second;
  if (op == "started") {
    std::lock_guard lock(run->mu);
    run->started = true;
    run->pid = m.value("pid", 0);
    ++run->version;
    run->cv.notify_all();
  } else if (op == "exited") {
    std::optional<int> code;
    if (m.contains("exit_code") && m["exit_code"].is_number_integer()) code = m["exit_code"].get<int>();
    int sig = m.value("signal", 0);
    if (sig) code.reset();
    if (m.value("status_lost", false)) {
      on_output(run, true,
                "kiln-sandbox: the command ended but its exit status was lost: its supervising process was killed "
                "at the same moment (kill -9 -1 inside?)\n");
    }
    if (m.value("memory_limit", false) || m.value("cpu_limit", false)) {
      std::lock_guard lock(run->mu);
      if (!run->pending)
        run->pending = m.value("memory_limit", false) ? StopReason::memory_limit : StopReason::cpu_limit;
    }
    on_exited(run, code, sig, m.value("user_ms", std::uint64_t{0}), m.value("sys_ms", std::uint64_t{0}),
              m.value("maxrss_kb", std::uint64_t{0}));
  } else if (op == "error" && run->direct_exec && m.value("step", "") == "exec") {
    // What `sh -c 'exec "$@"'` would have said: 127 for a missing program, 126 otherwise.
    int err = m.value("errno", 0);
    std::string text = fmt::format("kiln-sandbox: {}: {}\n", run->req.argv.empty() ? "" : run->req.argv[0],
                                   err ? std::strerror(err) : "cannot execute");
    on_output(run, true, text);
    on_exited(run, err == ENOENT || err == ENOTDIR ? 127 : 126, 0, 0, 0, 0);
  } else if (op == "error") {
    std::string text = fmt::format("the command could not be started (step '{}'{}): {}", m.value("step", "exec"),
                                   m.value("errno", 0) ? fmt::format(", {}", std::strerror(m.value("errno", 0))) : "",
                                   m.value("error", std::string("unknown error")));
    bool stopped_by_us = false;
    {
      std::lock_guard lock(run->mu);
      // A kill kiln had already sent (a timeout, a cancel, process_kill) got there first: e.g. a
      // shepherd the command had stopped before it could start the next exec. That is how the run
      // ended, not a failure to start it.
      stopped_by_us = run->pending.has_value();
      if (!stopped_by_us) {
        run->start_error = Error{Errc::invalid_argument, run->redactor ? run->redactor->redact(text) : text};
        run->pending = StopReason::setup_failed;
      }
      ++run->version;
      run->cv.notify_all();
    }
    on_exited(run, std::nullopt, stopped_by_us ? SIGKILL : 0, 0, 0, 0);
  }
}

void SandboxManager::Impl::helper_lost(const std::shared_ptr<Sandbox>& sb) {
  if (sb->control) {
    boost::system::error_code ec;
    sb->control->close(ec);
    sb->control.reset();
  }
  fail_connects(sb);
  auto execs = sb->execs;
  for (auto& [id, run] : execs) {
    bool exited;
    {
      std::lock_guard lock(run->mu);
      exited = run->exited;
      if (!exited && !run->pending) run->pending = StopReason::killed;
    }
    if (!exited) on_exited(run, std::nullopt, SIGKILL, 0, 0, 0);
  }
  if (!sb->closing && !sb->fresh) {
    // The helper died on its own (killed from outside, or crashed): the sandbox is gone.
    retire_sandbox(sb, [](CleanupReport) {});
  }
}

void SandboxManager::Impl::retire_sandbox(const std::shared_ptr<Sandbox>& sb, std::function<void(CleanupReport)> done) {
  auto t0 = Clock::now();
  bool already = sb->closing.exchange(true);
  auto report = std::make_shared<CleanupReport>();
  report->sandbox_id = sb->id;
  for (auto& [id, run] : sb->execs) {
    std::lock_guard lock(run->mu);
    if (!run->finished) {
      report->processes_killed.push_back(run->id);
      if (!run->pending) run->pending = StopReason::killed;
    }
  }
  auto finish_cleanup = [this, sb, report, done = std::move(done), t0]() mutable {
    report->namespaces_gone = !sb->unsandboxed;
    if (sb->egress) sb->egress->close_all();
    if (sb->cg) {
      sb->cg->kill_all();
      std::vector<std::string> left;
      sb->cg->remove(report->cgroups_removed, left);
      for (auto& l : left) report->leftovers.push_back("cgroup " + l + " could not be removed");
      sb->cg.reset();
    }
    // Runs whose helper vanished without an "exited" are finished here.
    for (auto& [id, run] : std::map(sb->execs)) {
      bool exited;
      {
        std::lock_guard lock(run->mu);
        exited = run->exited;
      }
      if (!exited) on_exited(run, std::nullopt, SIGKILL, 0, 0, 0);
    }
    report->duration_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    std::vector<std::function<void(const std::string&)>> listeners;
    {
      std::lock_guard lock(mu);
      sandboxes.erase(sb->id);
      listeners = gone_listeners;
    }
    sb->lease.release();
    for (auto& l : listeners) l(sb->id);
    done(*report);
  };
  if (sb->unsandboxed) {
    for (auto& [id, run] : std::map(sb->execs)) terminate(run, StopReason::killed);
    finish_cleanup();
    return;
  }
  if (sb->helper_gone || sb->helper_pid <= 0) {
    finish_cleanup();
    return;
  }
  if (already && !sb->on_helper_gone.empty()) {
    sb->on_helper_gone.push_back([f = std::make_shared<decltype(finish_cleanup)>(std::move(finish_cleanup))] { (*f)(); });
    return;
  }
  sb->on_helper_gone.push_back([f = std::make_shared<decltype(finish_cleanup)>(std::move(finish_cleanup))] { (*f)(); });
  // Closing the control channel makes the helper kill everything and exit; SIGKILL on the
  // helper (pid 1 of the sandbox) takes the whole pid namespace down at once, so do both.
  if (sb->control) send_control(sb->control_fd, json{{"op", "shutdown"}});
  kill_helper(*sb);
  if (!sb->pidfd) {
    int status;
    ::waitpid(sb->helper_pid, &status, 0);
    sb->helper_gone = true;
    helper_lost(sb);
    auto cbs = std::move(sb->on_helper_gone);
    for (auto& f : cbs) f();
  }
}

void SandboxManager::on_sandbox_gone(std::function<void(const std::string& sandbox_id)> listener) {
  std::lock_guard lock(impl_->mu);
  impl_->gone_listeners.push_back(std::move(listener));
}

Result<CleanupReport> SandboxManager::destroy(const std::string& owner, const std::string& sandbox_id) {
  auto sb = impl_->find_sandbox_of(sandbox_id, owner);
  if (!sb)
    return fail(Errc::not_found, fmt::format("no live sandbox '{}': call sandbox_list to see the live ones (it may "
                                             "have been destroyed or reaped after being idle)",
                                             sandbox_id));
  auto promise = std::make_shared<std::promise<CleanupReport>>();
  auto fut = promise->get_future();
  asio::post(impl_->io, [impl = impl_.get(), sb, promise] {
    impl->retire_sandbox(sb, [promise](CleanupReport r) { promise->set_value(std::move(r)); });
  });
  if (fut.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    CleanupReport r;
    r.sandbox_id = sandbox_id;
    r.leftovers.push_back("the helper did not exit within 10 s after SIGKILL");
    return r;
  }
  return fut.get();
}

json SandboxManager::list(const std::string& owner, const std::string& workspace_id) const {
  json out = json::array();
  std::lock_guard lock(impl_->mu);
  auto now = Clock::now();
  for (const auto& [id, sb] : impl_->sandboxes) {
    if (sb->spare) continue;  // warm and unused: not anyone's sandbox yet
    if (sb->policy.owner != owner) continue;
    if (!workspace_id.empty() && sb->policy.workspace_id != workspace_id) continue;
    json procs = json::array();
    for (const auto& [rid, run] : impl_->runs) {
      if (run->sandbox_id != id) continue;
      std::lock_guard rl(run->mu);
      procs.push_back({{"run_id", rid},
                       {"pid", run->pid},
                       {"command", run->req.display_command},
                       {"background", run->req.background},
                       {"running", !run->finished},
                       {"exit_code", run->exit_code ? json(*run->exit_code) : json(nullptr)},
                       {"started_s_ago", std::chrono::duration<double>(now - run->t_start).count()}});
    }
    out.push_back({{"sandbox_id", id},
                   {"workspace", sb->policy.workspace_id},
                   {"fresh", sb->fresh},
                   {"isolation", sb->unsandboxed ? "none" : "strict"},
                   {"network", to_string(sb->policy.network)},
                   {"age_s", std::chrono::duration<double>(now - sb->created).count()},
                   {"idle_s", std::chrono::duration<double>(now - sb->last_used).count()},
                   {"processes", std::move(procs)}});
  }
  return out;
}

std::optional<SandboxPolicy> SandboxManager::policy_of(const std::string& owner, const std::string& id) const {
  auto sb = impl_->find_sandbox_of(id, owner);
  if (!sb || sb->closing) return std::nullopt;
  return sb->policy;
}

std::string SandboxManager::redact(std::string_view text) const {
  std::lock_guard lock(impl_->mu);
  return impl_->all_secrets.redact(text);
}

void SandboxManager::redact_json(json& j) const {
  std::lock_guard lock(impl_->mu);
  impl_->all_secrets.redact_json(j);
}

void SandboxManager::Impl::arm_reaper() {
  auto period = std::min<std::chrono::seconds>(std::chrono::seconds(30), std::max<std::chrono::seconds>(std::chrono::seconds(1), opt.idle_timeout / 4));
  reaper->expires_after(period);
  reaper->async_wait([this](boost::system::error_code ec) {
    if (ec || stopped) return;
    std::vector<std::shared_ptr<Sandbox>> idle;
    {
      std::lock_guard lock(mu);
      auto now = Clock::now();
      for (auto& [id, sb] : sandboxes) {
        if (sb->fresh || sb->closing) continue;
        bool busy = false;
        for (auto& [eid, run] : sb->execs) {
          std::lock_guard rl(run->mu);
          if (!run->finished) busy = true;
        }
        // Background processes count as use: a server started in the background keeps its
        // sandbox alive only while someone talks to it, so busy is checked against last_used.
        if (now - sb->last_used >= opt.idle_timeout && (!busy || now - sb->last_used >= 2 * opt.idle_timeout))
          idle.push_back(sb);
      }
    }
    for (auto& sb : idle) retire_sandbox(sb, [](CleanupReport) {});
    retire_old_spares();
    arm_reaper();
  });
}

}  // namespace kiln::sandbox
