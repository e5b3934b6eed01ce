// Service lifecycles: prepare, start, readiness, restart, stop (postgres's databases are
// postgres_bootstrap.cpp). Every step that touches a service runs inside its sandbox as an exec
// (the readiness probe, psql, setup), so nothing of Kiln's host side ever connects to the sandbox's
// loopback, and a service is exactly as confined as any command an agent runs.
#include "services/service_host.h"
#include "services/service_host_impl.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <random>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "runs/run_tracing.h"
#include "sandbox/policy.h"
#include "services/recipes.h"
#include "services/server_binaries.h"

namespace kiln::services {

using nlohmann::json;
using server::ServiceConfig;
using server::ServiceKind;
namespace sbx = kiln::sandbox;


json to_json(const ServiceStatus& s) {
  json j = {{"name", s.name}, {"kind", s.kind}, {"state", s.state}, {"url", s.url},
            {"port", s.port}, {"pid", s.pid ? json(s.pid) : json(nullptr)},
            {"restarts", s.restarts},
            {"run_id", s.run_id.empty() ? json(nullptr) : json(s.run_id)},
            {"trace_id", s.trace_id.empty() ? json(nullptr) : json(s.trace_id)}};
  if (!s.database.empty()) j["database"] = s.database;
  if (!s.error.empty()) j["error"] = s.error;
  return j;
}

namespace {

std::string random_suffix() {
  std::random_device rd;
  return fmt::format("{:08x}", std::uniform_int_distribution<std::uint32_t>()(rd));
}

// The development database exists (the probe found it), or a verify's needs making: postgres only.
bool needs_bootstrap(const ServiceHost::Hosted& h, std::size_t i) {
  if (h.entries[i].config.kind != ServiceKind::postgres) return false;
  std::lock_guard lock(h.mu);
  return h.needs_bootstrap[i];
}


}  // namespace

ServiceHost::ServiceHost(sbx::SandboxManager& sandboxes, server::RunTracer* tracer, std::string state_dir)
    : sandboxes_(sandboxes), tracer_(tracer), state_dir_(std::move(state_dir)), state_(std::make_shared<State>()) {
  // When a sandbox is gone its services are too: drop them, which releases their data locks.
  sandboxes_.on_sandbox_gone([state = state_](const std::string& id) {
    std::shared_ptr<Hosted> gone;
    {
      std::lock_guard lock(state->mu);
      auto it = state->hosted.find(id);
      if (it == state->hosted.end()) return;
      gone = std::move(it->second);
      state->hosted.erase(it);
    }
    std::lock_guard lock(gone->mu);
    for (auto& s : gone->status)
      if (s.state == "starting" || s.state == "ready") s.state = "stopped";
  });
}

ServiceHost::~ServiceHost() = default;

Result<std::shared_ptr<ServiceHost::Prepared>> ServiceHost::prepare(const ServiceRequest& request,
                                                                   sbx::SandboxPolicy& policy, std::stop_token stop) {
  auto p = std::make_shared<Prepared>();
  p->request = request;
  // Outside a sandbox a service would be an unauthenticated server on the host's own loopback,
  // open to every local user, with its data folder taken as a host path. verify comes here with
  // kiln.json's isolation, so this is the one place that refuses it.
  if (policy.isolation != sbx::Isolation::strict)
    return fail(Errc::invalid_argument, "services run only in strict sandboxes; drop isolation: none");
  // postgres trusts and redis asks no password because only the sandbox's own loopback reaches
  // them; on the host's network every local user would be their superuser.
  if (policy.network == sbx::Network::host)
    return fail(Errc::invalid_argument, "services listen on the sandbox's own loopback, so they cannot run with "
                                        "network \"host\"; use network \"none\" or \"loopback\"");
  if (!request.config)
    return fail(Errc::invalid_argument, "services need a kiln.json with a \"services\" section in the workspace root");
  const auto& declared = request.config->services;
  std::string names;
  for (const auto& s : declared) names += (names.empty() ? "" : ", ") + s.name;
  std::set<std::string> wanted(request.names.begin(), request.names.end());
  for (const auto& w : wanted) {
    bool found = std::any_of(declared.begin(), declared.end(), [&](const ServiceConfig& s) { return s.name == w; });
    if (!found)
      return fail(Errc::invalid_argument,
                  declared.empty()
                      ? fmt::format("no service named '{}': kiln.json declares no \"services\"; add e.g. "
                                    "{{\"services\": {{\"db\": {{\"kind\": \"postgres\"}}}}}}",
                                    w)
                      : fmt::format("no service named '{}' in kiln.json; its services are: {}", w, names));
  }
  const bool need_bash = std::any_of(declared.begin(), declared.end(), [&](const ServiceConfig& s) {
    return wanted.contains(s.name) && s.kind != ServiceKind::postgres;
  });
  if (need_bash && ::access("/bin/bash", X_OK) != 0)
    return fail(Errc::unsupported, "service readiness checks need /bin/bash (Debian package bash)");

  std::vector<const ServiceConfig*> chosen;
  std::map<std::string, std::string> database_of;
  for (const auto& s : declared) {
    if (!wanted.contains(s.name)) continue;
    Prepared::Entry e;
    e.config = s;
    if (s.kind == ServiceKind::postgres) {
      auto pg = find_postgres();
      if (!pg) return fail(pg.error().code, fmt::format("service {}: {}", s.name, pg.error().message));
      e.bin = pg->bindir;
      const bool verify = request.use == DataUse::verify;
      // A verify run waits for another one on the same template; a second development sandbox
      // would be a second postmaster on the same cluster, so it is refused at once.
      const std::string base =
          request.data_base.empty() ? state_dir_ + "/services/" + request.workspace_id : request.data_base;
      auto data = open_data_folder(base, s.name, request.use, data_target(s.name),
                                   verify ? int(s.ready_timeout_s * 1000) : 0, stop);
      if (!data) {
        if (data.error().code == Errc::cancelled) return std::unexpected(data.error());
        if (data.error().code != Errc::conflict)
          return fail(data.error().code, fmt::format("service {}: {}", s.name, data.error().message));
        std::string holder;
        {
          std::lock_guard lock(state_->mu);
          // Named only to its own owner: another principal's sandbox ids are never shown (TOOLS.md).
          for (const auto& [id, h] : state_->hosted)
            if (h->request.workspace_id == request.workspace_id && h->request.use == request.use &&
                h->owner == request.owner)
              holder = id;
        }
        if (verify)
          return fail(Errc::conflict, fmt::format("service {}: another verify run of this workspace still uses its "
                                                  "template after {} s; run verify again when it is done",
                                                  s.name, s.ready_timeout_s));
        if (holder.empty())
          return fail(Errc::conflict, fmt::format("service {} of this workspace already runs in a sandbox of another "
                                                  "session or Kiln server; it can run in one sandbox at a time",
                                                  s.name));
        return fail(Errc::conflict, fmt::format("service {} of this workspace already runs in sandbox {}: run your "
                                                "commands there (sandbox_exec {{\"sandbox_id\": \"{}\"}}), or "
                                                "sandbox_destroy it first",
                                                s.name, holder, holder));
      }
      // The lock was free, but a postmaster of a sandbox whose server was just killed may still be
      // on its way out (its pid namespace is torn down after the lock went): wait for it.
      if (auto unused = wait_until_unused(data->path + "/pgdata", 5000); !unused)
        return fail(unused.error().code, fmt::format("service {}: {}", s.name, unused.error().message));
      e.data = std::move(*data);
      policy.data_binds.push_back(e.data->bind);
      e.database = verify ? "verify_" + random_suffix() : kDevDatabase;
      database_of[s.name] = e.database;
    } else if (s.kind == ServiceKind::redis) {
      auto r = find_redis_server();
      if (!r) return fail(r.error().code, fmt::format("service {}: {}", s.name, r.error().message));
      e.bin = *r;
    }
    e.recipe = make_recipe(s, e.bin);
    p->entries.push_back(std::move(e));
  }
  for (const auto& e : p->entries) chosen.push_back(&e.config);
  for (auto& [k, v] : connection_env(chosen, database_of)) policy.env[k] = v;
  for (const auto& e : p->entries)
    if (!e.recipe.bindir.empty()) {
      // psql, pg_dump and friends of the server's own version first on PATH: Debian's /usr/bin/psql
      // is a Perl wrapper that picks a version per call and costs ~100 ms a run.
      auto path = policy.env.find("PATH");
      const std::string base = path != policy.env.end() ? path->second : sbx::kSafePath;
      if (base.find(e.recipe.bindir) == std::string::npos) policy.env["PATH"] = e.recipe.bindir + ":" + base;
      break;
    }
  policy.hosts_services = !p->entries.empty();
  return p;
}

Result<std::vector<ServiceStatus>> ServiceHost::start(std::shared_ptr<Prepared> prepared, const std::string& sandbox_id,
                                                      std::stop_token stop) {
  auto h = std::make_shared<Hosted>();
  h->sandbox_id = sandbox_id;
  h->owner = prepared->request.owner;
  h->request = prepared->request;
  h->entries = std::move(prepared->entries);
  for (const auto& e : h->entries) {
    ServiceStatus s;
    s.name = e.config.name;
    s.kind = server::to_string(e.config.kind);
    s.state = "starting";
    s.port = e.config.port;
    s.url = e.config.kind == ServiceKind::postgres ? postgres_url(e.config, e.database) : e.recipe.url;
    s.database = e.database;
    h->status.push_back(std::move(s));
    h->stopping.push_back(false);
    h->needs_bootstrap.push_back(true);
    h->generation.push_back(0);
  }
  {
    std::lock_guard lock(state_->mu);
    state_->hosted[sandbox_id] = h;
  }
  // A sandbox that died before it was recorded here would never be reported gone: drop it now,
  // or its data locks would stay taken for the life of this server.
  if (!sandboxes_.policy_of(h->owner, sandbox_id)) {
    std::lock_guard lock(state_->mu);
    state_->hosted.erase(sandbox_id);
    return fail(Errc::not_found, fmt::format("sandbox {} ended before its services could start", sandbox_id));
  }
  // Databases first, then the project's own servers: a server often connects (or migrates) as it
  // starts, or answers its `ready` path only once its database exists and `setup` has run, as
  // Compose's depends_on service_healthy would order them. Within each group all start at once.
  for (const bool own_servers : {false, true}) {
    auto in_group = [&](std::size_t i) { return (h->entries[i].config.kind == ServiceKind::command) == own_servers; };
    for (std::size_t i = 0; i < h->entries.size(); ++i)
      if (in_group(i))
        if (auto ok = launch(*h, i, stop); !ok) return std::unexpected(ok.error());
    for (std::size_t i = 0; i < h->entries.size(); ++i) {
      if (!in_group(i)) continue;
      if (auto ok = wait_ready(*h, i, stop); !ok) return std::unexpected(ok.error());
      if (needs_bootstrap(*h, i))
        if (auto ok = bootstrap_postgres(*h, i, stop); !ok) return std::unexpected(ok.error());
      std::lock_guard lock(h->mu);
      if (h->status[i].state == "starting") h->status[i].state = "ready";
    }
  }
  std::lock_guard lock(h->mu);
  return h->status;
}

Result<void> ServiceHost::launch(Hosted& h, std::size_t i, std::stop_token stop) {
  const auto& e = h.entries[i];
  sbx::ExecRequest req;
  req.owner = h.owner;
  req.argv = e.recipe.start;
  req.display_command = e.recipe.display;
  req.cwd = e.config.cwd.empty() ? h.request.workspace_root : h.request.workspace_root + "/" + e.config.cwd;
  req.background = true;
  req.long_lived = true;  // not killed for its logs, nor for others' writes to its disk over hours
  req.env = e.config.env;
  // Tracked through the Hosted record, which outlives neither the sandbox nor this host's state.
  std::weak_ptr<Hosted> weak;
  {
    std::lock_guard lock(state_->mu);
    if (auto it = state_->hosted.find(h.sandbox_id); it != state_->hosted.end()) weak = it->second;
  }
  int generation;
  {
    std::lock_guard lock(h.mu);
    generation = ++h.generation[i];
  }
  // May run before start() below returns (a command that exits at once): keyed by generation, not run id.
  req.on_finished = [weak, i, generation](const sbx::ExecResult& r) {
    auto hp = weak.lock();
    if (!hp) return;
    std::lock_guard lock(hp->mu);
    auto& s = hp->status[i];
    if (hp->generation[i] != generation) return;  // an earlier incarnation (before a restart)
    if (hp->stopping[i]) {
      s.state = "stopped";
    } else {
      s.state = "failed";
      s.error = "the service " + describe(r);
    }
  };
  std::string trace_id;
  if (tracer_) {
    server::ExecTraceInfo info;
    info.kind = "service";
    info.workspace_id = h.request.workspace_id;
    info.parent_id = h.request.parent_trace;
    info.name = e.config.name;
    info.client = h.request.client;
    info.principal = h.owner;
    info.policy = json{{"service", e.config.name}, {"kind", server::to_string(e.config.kind)},
                       {"port", e.config.port}, {"sandbox_id", h.sandbox_id}};
    auto id = tracer_->attach(req, info);
    if (!id) return fail(id.error().code, fmt::format("service {}: could not record its trace: {}", e.config.name,
                                                      id.error().message));
    trace_id = *id;
  }
  {
    std::lock_guard lock(h.mu);
    h.stopping[i] = false;
    h.status[i].state = "starting";
    h.status[i].error.clear();
    h.status[i].trace_id = trace_id;
  }
  auto started = sandboxes_.start(h.sandbox_id, nullptr, std::move(req), stop);
  if (!started) {
    std::lock_guard lock(h.mu);
    h.status[i].state = "failed";
    h.status[i].error = started.error().message;
    return fail(started.error().code, fmt::format("service {} could not be started: {}", e.config.name,
                                                  started.error().message));
  }
  std::lock_guard lock(h.mu);
  h.status[i].run_id = started->run_id;
  h.status[i].pid = started->pid;
  return {};
}

std::string ServiceHost::last_lines(const Hosted& h, std::size_t i) const {
  std::string run_id;
  {
    std::lock_guard lock(h.mu);
    run_id = h.status[i].run_id;
  }
  if (run_id.empty()) return "";
  auto head = sandboxes_.output(h.owner, run_id, sbx::Stream::both, 0, 0, 0);
  if (!head) return "";
  const std::uint64_t from = head->total_bytes > 4096 ? head->total_bytes - 4096 : 0;
  auto page = sandboxes_.output(h.owner, run_id, sbx::Stream::both, from, 4096, 0);
  if (!page) return "";
  std::string text = page->data;
  // The last 20 lines.
  std::size_t pos = text.size(), lines = 0;
  while (pos > 0 && lines <= 20) {
    pos = text.rfind('\n', pos - 1);
    if (pos == std::string::npos) {
      pos = 0;
      break;
    }
    ++lines;
  }
  if (pos > 0) text = text.substr(pos + 1);
  while (!text.empty() && text.back() == '\n') text.pop_back();
  return text;
}

Result<void> ServiceHost::wait_ready(Hosted& h, std::size_t i, std::stop_token stop) {
  const auto& e = h.entries[i];
  int pid;
  {
    std::lock_guard lock(h.mu);
    pid = h.status[i].pid;
    if (h.status[i].state == "failed") pid = -1;
  }
  auto failed = [&](const std::string& why) -> Result<void> {
    std::string log = last_lines(h, i);
    std::string trace;
    {
      std::lock_guard lock(h.mu);
      h.status[i].state = "failed";
      h.status[i].error = why;
      trace = h.status[i].trace_id;
    }
    return fail(Errc::unsupported,
                fmt::format("service {} ({}) {}. Its last output{}:\n{}", e.config.name,
                            server::to_string(e.config.kind), why, trace.empty() ? "" : " (trace " + trace + ")",
                            log.empty() ? "(nothing)" : log));
  };
  // How the service ended, once its on_finished has said so (it runs a moment after the process
  // is gone, later still on a loaded machine).
  auto ended_how = [&] {
    std::string why;
    for (int k = 0; k < 200; ++k) {
      {
        std::lock_guard lock(h.mu);
        why = h.status[i].error;
      }
      if (!why.empty()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    return why.empty() ? std::string("exited before it was ready")
                       : why.substr(std::string("the service ").size()) + " before it was ready";
  };
  if (pid <= 0) return failed(ended_how());
  sbx::ExecRequest probe;
  probe.owner = h.owner;
  // A development database that exists needs no bootstrap: the probe says so in the same exec.
  const bool dev_pg = e.config.kind == ServiceKind::postgres && h.request.use != DataUse::verify;
  probe.argv = probe_command(e.config, e.bin, pid, dev_pg ? kDevDatabase : "");
  probe.display_command = "readiness check of service " + e.config.name;
  probe.cwd = "/tmp";
  probe.timeout_s = e.config.ready_timeout_s;
  probe.tail_bytes = 512;
  auto r = sandboxes_.exec(h.sandbox_id, nullptr, std::move(probe), stop);
  if (!r) return failed("could not be checked for readiness: " + r.error().message);
  if (r->stop_reason == sbx::StopReason::cancelled) return fail(Errc::cancelled, "cancelled while services started");
  if (r->stop_reason == sbx::StopReason::exit && (r->exit_code == 0 || (dev_pg && r->exit_code == 4))) {
    std::lock_guard lock(h.mu);
    h.needs_bootstrap[i] = !dev_pg || r->exit_code == 4;
    return {};
  }
  // The service itself may have ended meanwhile: say how.
  std::string why;
  {
    std::lock_guard lock(h.mu);
    why = h.status[i].error;
  }
  if (r->stop_reason == sbx::StopReason::timeout)
    return failed(fmt::format("did not become ready within {} s (ready_timeout_s)", e.config.ready_timeout_s));
  if (r->stop_reason == sbx::StopReason::exit && r->exit_code == 3) {
    return failed(ended_how());
  }
  return failed("could not be checked for readiness (the check " + describe(*r) + ")");
}


std::shared_ptr<ServiceHost::Hosted> ServiceHost::find(const std::string& owner, const std::string& sandbox_id) const {
  std::lock_guard lock(state_->mu);
  auto it = state_->hosted.find(sandbox_id);
  if (it == state_->hosted.end() || it->second->owner != owner) return nullptr;
  return it->second;
}

std::vector<ServiceStatus> ServiceHost::list(const std::string& owner, const std::string& sandbox_id) const {
  auto h = find(owner, sandbox_id);
  if (!h) return {};
  std::lock_guard lock(h->mu);
  return h->status;
}

namespace {

// Waits for a run to end (up to `ms`); true when it did.
bool wait_ended(sbx::SandboxManager& m, const std::string& owner, const std::string& run_id, int ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (std::chrono::steady_clock::now() < deadline) {
    auto page = m.output(owner, run_id, sbx::Stream::stdout_, ~std::uint64_t(0) >> 1, 0, 100);
    if (!page || !page->running) return true;
  }
  return false;
}

int stop_signal(ServiceKind k) { return k == ServiceKind::postgres ? SIGINT : SIGTERM; }

}  // namespace

Result<ServiceStatus> ServiceHost::restart(const std::string& owner, const std::string& sandbox_id,
                                           const std::string& name, std::stop_token stop) {
  auto h = find(owner, sandbox_id);
  if (!h)
    return fail(Errc::not_found, fmt::format("sandbox '{}' runs no services: create one with sandbox_create "
                                             "{{\"services\": [\"{}\"]}}",
                                             sandbox_id, name));
  std::size_t i = 0;
  while (i < h->entries.size() && h->entries[i].config.name != name) ++i;
  if (i == h->entries.size()) {
    std::string names;
    for (const auto& e : h->entries) names += (names.empty() ? "" : ", ") + e.config.name;
    return fail(Errc::invalid_argument, fmt::format("sandbox {} runs no service '{}'; it runs: {}", sandbox_id, name, names));
  }
  std::string run_id;
  {
    std::lock_guard lock(h->mu);
    run_id = h->status[i].run_id;
    h->stopping[i] = true;
  }
  if (!run_id.empty()) {
    auto k = sandboxes_.kill(owner, run_id, stop_signal(h->entries[i].config.kind));
    if (k && !*k && !wait_ended(sandboxes_, owner, run_id, 10000)) {
      (void)sandboxes_.kill(owner, run_id, SIGKILL);
      wait_ended(sandboxes_, owner, run_id, 5000);
    }
  }
  {
    std::lock_guard lock(h->mu);
    ++h->status[i].restarts;
  }
  if (auto ok = launch(*h, i, stop); !ok) return std::unexpected(ok.error());
  if (auto ok = wait_ready(*h, i, stop); !ok) return std::unexpected(ok.error());
  if (needs_bootstrap(*h, i))
    if (auto ok = bootstrap_postgres(*h, i, stop); !ok) return std::unexpected(ok.error());
  std::lock_guard lock(h->mu);
  if (h->status[i].state == "starting") h->status[i].state = "ready";
  return h->status[i];
}

void ServiceHost::stop_all(const std::string& owner, const std::string& sandbox_id) {
  auto h = find(owner, sandbox_id);
  if (!h) return;
  std::vector<std::string> runs;
  for (std::size_t i = 0; i < h->entries.size(); ++i) {
    std::string run_id;
    {
      std::lock_guard lock(h->mu);
      if (h->status[i].state != "ready" && h->status[i].state != "starting") continue;
      h->stopping[i] = true;
      run_id = h->status[i].run_id;
    }
    if (run_id.empty()) continue;
    (void)sandboxes_.kill(owner, run_id, stop_signal(h->entries[i].config.kind));
    runs.push_back(run_id);
  }
  for (const auto& r : runs) wait_ended(sandboxes_, owner, r, 5000);
}

}  // namespace kiln::services
