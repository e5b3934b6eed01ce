// An app's environment: its version's files copied out of the blob store into a read-only
// folder, its data folder, its services and the strict sandbox around them, and the web process
// with its readiness check from outside (a connection through the sandbox's pid 1).
#include "serve/app_impl.h"
#include "serve/app_network.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <random>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "artifacts/artifact_store.h"
#include "core/fd_io.h"
#include "core/open_dir.h"
#include "runs/run_tracing.h"
#include "sandbox/manager.h"
#include "sandbox/policy.h"
#include "services/recipes.h"
#include "services/server_binaries.h"
#include "services/service_host.h"

namespace kiln::server::apps {

using nlohmann::json;
namespace fs = std::filesystem;
namespace sbx = kiln::sandbox;

namespace {

constexpr const char* kDataTarget = "/var/lib/kiln/data";
constexpr const char* kExportTarget = "/var/lib/kiln/export";

Result<void> make_dir(const std::string& p) {
  if (::mkdir(p.c_str(), 0700) != 0 && errno != EEXIST)
    return fail(Errc::io, fmt::format("cannot create {}: {}", p, std::strerror(errno)));
  return {};
}

Result<sbx::DataBind> bind_of(const std::string& dir, const std::string& target) {
  UniqueFd fd(open_dir_no_symlinks(dir.c_str()));
  if (!fd) return fail(Errc::io, fmt::format("cannot open {} without following links: {}", dir, std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISDIR(st.st_mode)) return fail(Errc::io, fmt::format("{} is not a folder", dir));
  return sbx::DataBind{dir, target, std::uint64_t(st.st_dev), std::uint64_t(st.st_ino)};
}

// The version's files as a plain folder (copied: the app must never reach the shared blobs),
// made once per version under a temporary name and renamed into place when complete.
Result<std::string> materialize(artifacts::ArtifactStore& store, const std::string& app_dir, const std::string& name,
                                int version) {
  const std::string versions = app_dir + "/versions";
  if (auto ok = make_dir(versions); !ok) return std::unexpected(ok.error());
  const std::string dir = fmt::format("{}/{}", versions, version);
  struct stat st {};
  if (::lstat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return dir;
  auto manifest = store.manifest(name, version);
  if (!manifest) return std::unexpected(manifest.error());
  std::random_device rd;
  const std::string tmp = fmt::format("{}/.tmp-{}-{:08x}", versions, version, rd());
  std::error_code ec;
  fs::create_directories(tmp, ec);
  if (ec) return fail(Errc::io, fmt::format("cannot create {}: {}", tmp, ec.message()));
  auto cleanup = [&] { fs::remove_all(tmp, ec); };
  for (const auto& [path, meta] : manifest->items()) {
    auto file = store.resolve(name, version, path);
    if (!file) {
      cleanup();
      return fail(file.error().code, fmt::format("version {} of {}: {}: {}", version, name, path, file.error().message));
    }
    const fs::path dst = fs::path(tmp) / path;
    fs::create_directories(dst.parent_path(), ec);
    if (!ec) fs::copy_file(file->blob_path, dst, fs::copy_options::overwrite_existing, ec);
    if (ec) {
      cleanup();
      return fail(Errc::io, fmt::format("cannot copy {} of {} version {}: {}", path, name, version, ec.message()));
    }
    ::chmod(dst.c_str(), 0644);
  }
  if (::rename(tmp.c_str(), dir.c_str()) != 0 && errno != EEXIST && errno != ENOTEMPTY) {
    int err = errno;
    cleanup();
    return fail(Errc::io, fmt::format("cannot move {} into place: {}", dir, std::strerror(err)));
  }
  if (::lstat(tmp.c_str(), &st) == 0) cleanup();  // another start made it first
  return dir;
}

// Older versions' copies are not needed once a newer one runs (data lives elsewhere).
void drop_old_versions(const std::string& app_dir, int keep) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(app_dir + "/versions", ec)) {
    const std::string n = e.path().filename().string();
    if (n != std::to_string(keep)) fs::remove_all(e.path(), ec);
  }
}

std::string describe_exit(const sbx::ExecResult& r) {
  if (r.stop_reason == sbx::StopReason::exit) return fmt::format("exited with code {}", r.exit_code.value_or(-1));
  if (r.stop_reason == sbx::StopReason::signal) return fmt::format("was killed by signal {}", sbx::signal_name(r.signal));
  return fmt::format("stopped ({})", sbx::to_string(r.stop_reason));
}

// Waits for a non-blocking connect; true once it is established.
bool connected(int fd, int timeout_ms) {
  pollfd p{fd, POLLOUT, 0};
  if (::poll(&p, 1, timeout_ms) != 1) return false;
  int err = 0;
  socklen_t len = sizeof err;
  return ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0;
}

// GET `path` on an established connection: true for a 2xx or 3xx answer.
bool http_ready(int fd, const std::string& path, int timeout_ms) {
  const std::string req = fmt::format("GET {} HTTP/1.1\r\nHost: localhost\r\nUser-Agent: kiln-ready\r\nConnection: close\r\n\r\n", path);
  if (::send(fd, req.data(), req.size(), MSG_NOSIGNAL) != ssize_t(req.size())) return false;
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, timeout_ms) != 1) return false;
  char buf[64];
  ssize_t n = ::recv(fd, buf, sizeof buf, 0);
  if (n < 12) return false;
  std::string head(buf, std::size_t(n));
  return head.starts_with("HTTP/1.") && (head[9] == '2' || head[9] == '3');
}

// `/bin/sh -c "node server.js"`: a plain command line becomes `exec node server.js`, so the app is
// the process Kiln signals (a SIGTERM to stop it reaches the app itself, and an app that exits 0
// on it leaves a passing trace) instead of a shell that dies of the signal. Anything with shell
// syntax in it stays as written.
std::vector<std::string> web_argv(const std::vector<std::string>& argv) {
  if (argv.size() != 3 || argv[0] != "/bin/sh" || argv[1] != "-c") return argv;
  const std::string& cmd = argv[2];
  const bool plain = !cmd.empty() && std::all_of(cmd.begin(), cmd.end(), [](unsigned char c) {
    return std::isalnum(c) || c == ' ' || std::string_view("_./=:@%+,-").find(char(c)) != std::string_view::npos;
  });
  if (!plain || cmd.find('=') < cmd.find(' ')) return argv;  // VAR=value cmd: leave it to the shell
  return {argv[0], argv[1], "exec " + cmd};
}

}  // namespace

Result<UniqueFd> Supervisor::Impl::connect(App& app, std::chrono::milliseconds timeout) {
  std::string sandbox_id;
  int port;
  {
    std::lock_guard lock(app.mu);
    sandbox_id = app.sandbox_id;
    port = app.port;
  }
  if (sandbox_id.empty()) return fail(Errc::not_found, "the app's sandbox is not running");
  return opt.sandboxes->connect(opt.principal, sandbox_id, port, timeout);
}

Result<void> Supervisor::Impl::bring_up(App& app, bool web, std::stop_token stop) {
  std::string name, workspace_id;
  int version, port;
  AppConfig config;
  std::vector<ServiceConfig> services;
  {
    std::unique_lock lock(app.mu);
    if (app.removed) {
      app.start_pending = false;
      return fail(Errc::conflict, "the app was unpublished");
    }
    if (!web && app.env_up) return {};
    if (web && app.state == AppState::running && app.env_up) {
      app.start_pending = false;
      return {};
    }
    if (web) app.state = AppState::starting;
    name = app.name;
    workspace_id = app.workspace_id;
    version = app.version;
    port = app.port;
    config = app.config;
    services = app.services;
  }
  const std::string dir = app_dir(name);
  auto failed = [&](const Error& e, bool env_failed) -> Result<void> {
    if (env_failed) bring_down(app, true);
    std::unique_lock lock(app.mu);
    app.start_pending = false;
    if (web && !app.removed) {
      app.state = AppState::crashed;
      app.last_error = e.message;
      ++app.restarts;
      app.retry_at = now_s() + app.backoff_s;
      app.backoff_s = std::min(app.backoff_s * 2, 60);
      save_app(app);
      answer_waiters(app, lock);
    }
    return std::unexpected(e);
  };

  bool env_up;
  {
    std::lock_guard lock(app.mu);
    env_up = app.env_up;
  }
  if (!env_up) {
    if (auto ok = make_dir(dir); !ok) return failed(ok.error(), false);
    for (const char* sub : {"/data", "/export", "/services"})
      if (auto ok = make_dir(dir + sub); !ok) return failed(ok.error(), false);
    auto files = materialize(*opt.store, dir, name, version);
    if (!files) return failed(files.error(), false);

    // Through make_policy like any sandbox, so an allowlist gets the same checks, and the server's
    // --network-allow ceiling narrows it when the sandbox is made.
    auto network = app_network_arg(config);
    if (!network) return failed(network.error(), false);
    sbx::PolicyInput in;
    in.config_sandbox = json{{"limits", config.limits}, {"env", config.env}};
    in.args = json{{"network", *network}};
    in.workspace_root = *files;
    in.workspace_id = workspace_id;
    auto policy = sbx::make_policy(in);
    if (!policy) return failed(policy.error(), false);
    policy->owner = opt.principal;
    policy->egress_publisher_ceiling = app_publisher_ceiling(config);
    policy->workspace_readonly = true;
    policy->env["PORT"] = std::to_string(port);
    policy->env["KILN_BASE_PATH"] = "/a/" + name + "/";
    policy->env["KILN_DATA_DIR"] = kDataTarget;
    policy->env["KILN_APP"] = name;
    for (auto [sub, target] : {std::pair{"/data", kDataTarget}, std::pair{"/export", kExportTarget}}) {
      auto b = bind_of(dir + sub, target);
      if (!b) return failed(b.error(), false);
      policy->data_binds.push_back(*b);
    }
    if (auto ok = opt.sandboxes->finalize_policy(*policy); !ok) return failed(ok.error(), false);

    KilnConfig kc;
    kc.services = services;
    services::ServiceRequest req;
    req.config = &kc;
    req.names = config.services;
    req.use = services::DataUse::app;
    req.data_base = dir + "/services";
    req.workspace_id = workspace_id;
    req.workspace_root = *files;
    req.owner = opt.principal;
    req.client = json{{"name", "kiln serve"}, {"app", name}};
    std::shared_ptr<services::ServiceHost::Prepared> prepared;
    if (!config.services.empty()) {
      auto p = opt.services->prepare(req, *policy, stop);
      if (!p) return failed(p.error(), false);
      prepared = *p;
    }
    policy->hosts_services = true;  // the app's own loopback is up even without services
    auto created = creator.run([&] { return opt.sandboxes->create(*policy, stop); });
    if (!created) return failed(created.error(), false);
    {
      std::lock_guard lock(app.mu);
      app.sandbox_id = created->sandbox_id;
      app.env_up = true;
    }
    if (prepared) {
      auto started = opt.services->start(prepared, created->sandbox_id, stop);
      if (!started) return failed(started.error(), true);
    }
    drop_old_versions(dir, version);
  }
  if (!web) return {};

  std::string sandbox_id;
  int generation;
  {
    std::lock_guard lock(app.mu);
    sandbox_id = app.sandbox_id;
    generation = ++app.generation;
  }
  sbx::ExecRequest req;
  req.owner = opt.principal;
  req.argv = web_argv(config.argv);
  req.display_command = config.display;
  {
    std::lock_guard lock(app.mu);
    req.cwd = fmt::format("{}/versions/{}", dir, version);
  }
  req.background = true;
  req.long_lived = true;
  std::weak_ptr<Impl> weak_self = weak_from_this();
  std::shared_ptr<App> app_ref;
  {
    std::lock_guard lock(mu);
    if (auto it = apps.find(name); it != apps.end()) app_ref = it->second;
  }
  std::weak_ptr<App> weak_app = app_ref;
  req.on_finished = [weak_self, weak_app, generation](const sbx::ExecResult& r) {
    auto a = weak_app.lock();
    auto self = weak_self.lock();
    if (!a || !self) return;
    std::lock_guard lock(a->mu);
    if (a->generation != generation) return;  // stopped on purpose, or an earlier incarnation
    const bool long_run = a->started_at && now_s() - a->started_at > 60;
    if (long_run) a->backoff_s = 1;
    a->state = AppState::crashed;
    a->last_error = "the app " + describe_exit(r);
    ++a->restarts;
    a->retry_at = now_s() + a->backoff_s;
    a->backoff_s = std::min(a->backoff_s * 2, 60);
    a->idle_fds.clear();
    a->web_run_id.clear();
    self->save_app(*a);
    spdlog::warn("apps: {} {}; restarting in {} s", a->name, a->last_error, a->retry_at - now_s());
  };
  if (opt.tracer) {
    auto info = trace_info("app", workspace_id, name,
                           json{{"app", name}, {"version", version}, {"sandbox_id", sandbox_id}, {"port", port},
                                {"network", network_report(config)}});
    auto id = opt.tracer->attach(req, info);
    if (!id) return failed(id.error(), false);
    std::lock_guard lock(app.mu);
    app.web_trace_id = *id;
  }
  auto started = opt.sandboxes->start(sandbox_id, nullptr, std::move(req), stop);
  if (!started) return failed(started.error(), false);
  {
    std::lock_guard lock(app.mu);
    app.web_run_id = started->run_id;
  }

  // Ready: the port takes a connection (and the ready path answers), checked from outside.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(config.start_timeout_s);
  bool ready = false;
  while (std::chrono::steady_clock::now() < deadline && !stop.stop_requested()) {
    {
      std::lock_guard lock(app.mu);
      if (app.generation != generation || app.state == AppState::crashed) break;
    }
    auto fd = connect(app, std::chrono::milliseconds(500));
    if (!fd) {
      spdlog::debug("apps: {} not ready yet: {}", name, fd.error().message);
    } else if (connected(fd->get(), 500) &&
               (config.ready_path.empty() || http_ready(fd->get(), config.ready_path, 2000))) {
      ready = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::unique_lock lock(app.mu);
  if (!ready) {
    std::string why = app.state == AppState::crashed
                          ? app.last_error + " before it was ready"
                          : fmt::format("did not accept connections on $PORT ({}) within {} s (start_timeout_s)",
                                        port, config.start_timeout_s);
    lock.unlock();
    bring_down(app, false);
    // The crash callback may have counted this already; count the failed start once.
    lock.lock();
    if (app.state == AppState::crashed) {
      app.start_pending = false;
      app.last_error = why;
      answer_waiters(app, lock);
      return fail(Errc::unsupported, why);
    }
    lock.unlock();
    return failed(Error{Errc::unsupported, why}, false);
  }
  app.state = AppState::running;
  app.started_at = now_s();
  app.last_request_at = std::max(app.last_request_at, app.started_at);
  app.start_pending = false;
  app.last_error.clear();
  save_app(app);
  answer_waiters(app, lock);
  spdlog::info("apps: {} version {} is running (sandbox {})", name, version, sandbox_id);
  return {};
}

void Supervisor::Impl::bring_down(App& app, bool env) {
  std::string run_id, sandbox_id;
  bool take_env;
  {
    std::lock_guard lock(app.mu);
    ++app.generation;  // its exit is no crash
    run_id = std::move(app.web_run_id);
    app.web_run_id.clear();
    app.idle_fds.clear();
    take_env = env && app.env_up && app.env_users == 0;
    sandbox_id = app.sandbox_id;
    if (app.state == AppState::running || app.state == AppState::starting)
      app.state = env ? AppState::sleeping : AppState::starting;
  }
  if (!run_id.empty()) {
    // SIGTERM first, so the app can finish what it writes; then the whole tree.
    auto r = opt.sandboxes->kill(opt.principal, run_id, SIGTERM);
    for (int i = 0; i < 100 && r && !*r; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      r = opt.sandboxes->kill(opt.principal, run_id, 0);
    }
    if (r && !*r) opt.sandboxes->kill(opt.principal, run_id, SIGKILL);
  }
  if (take_env && !sandbox_id.empty()) {
    opt.services->stop_all(opt.principal, sandbox_id);
    opt.sandboxes->destroy(opt.principal, sandbox_id);
    std::lock_guard lock(app.mu);
    app.env_up = false;
    app.sandbox_id.clear();
  }
  std::lock_guard lock(app.mu);
  save_app(app);
}

Result<json> Supervisor::export_data(const std::string& name) {
  auto found = impl_->known_app(name);
  if (!found) return std::unexpected(found.error());
  auto app = *found;
  auto& s = *impl_;
  {
    std::lock_guard op(app->op_mu);
    if (auto ok = s.bring_up(*app, false, {}); !ok) return std::unexpected(ok.error());
    std::lock_guard lock(app->mu);
    ++app->env_users;
  }
  auto release = [&] {
    std::lock_guard op(app->op_mu);
    bool sleep;
    {
      std::lock_guard lock(app->mu);
      --app->env_users;
      sleep = app->state != AppState::running && app->state != AppState::starting && app->env_users == 0;
    }
    if (sleep) s.bring_down(*app, true);
  };
  const std::string dir = s.app_dir(name);
  std::string sandbox_id;
  std::vector<ServiceConfig> services;
  std::vector<std::string> wanted;
  {
    std::lock_guard lock(app->mu);
    sandbox_id = app->sandbox_id;
    services = app->services;
    wanted = app->config.services;
  }
  json files = json::array();
  for (const auto& svc : services) {
    if (svc.kind != ServiceKind::postgres || std::find(wanted.begin(), wanted.end(), svc.name) == wanted.end()) continue;
    auto pg = services::find_postgres();
    if (!pg) {
      release();
      return std::unexpected(pg.error());
    }
    const std::string file = svc.name + ".sql";
    ::unlink((dir + "/export/" + file).c_str());
    sbx::ExecRequest req;
    req.owner = s.opt.principal;
    req.argv = {pg->bindir + "/pg_dump", "--no-owner", "--no-privileges", "-h", "127.0.0.1", "-p",
                std::to_string(svc.port), "-U", "postgres", "-d", services::kDevDatabase, "-f",
                std::string(kExportTarget) + "/" + file};
    req.display_command = "pg_dump of service " + svc.name;
    req.cwd = "/tmp";
    req.timeout_s = 600;
    auto r = s.opt.sandboxes->exec(sandbox_id, nullptr, std::move(req));
    if (!r || r->stop_reason != sbx::StopReason::exit || r->exit_code != 0) {
      release();
      std::string why = !r ? r.error().message : describe_exit(*r) + ": " + r->err.text;
      return fail(Errc::io, fmt::format("pg_dump of service {} failed: {}", svc.name, why));
    }
    files.push_back({{"name", file}, {"path", dir + "/export/" + file}, {"service", svc.name}});
  }
  release();
  return json{{"files", std::move(files)}, {"data_dir", dir + "/data"}};
}

}  // namespace kiln::server::apps
