// Warm spare sandboxes. Building a strict sandbox (helper, namespaces, mounts, seccomp, Landlock,
// cgroups) costs most of a fresh exec; agents run fresh execs with the same policy again and
// again, so the next one is built while nobody waits. A spare is only ever used once, for the
// exact policy it was made for, and is destroyed after a minute unused.
#include <chrono>

#include <nlohmann/json.hpp>

#include "sandbox/manager_impl.h"

namespace kiln::sandbox {

namespace {

constexpr auto kSpareTtl = std::chrono::seconds(60);

nlohmann::json limits_key(const Limits& l) {
  auto opt = [](const auto& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
  return {opt(l.wall_s), opt(l.cpu_s), opt(l.memory_mb), opt(l.pids), opt(l.output_bytes), opt(l.file_size_mb),
          opt(l.disk_mb)};
}

// Everything a sandbox is built from. Secrets are resolved when the sandbox is made, so a
// policy with secrets never gets a spare (a changed secret must not be served stale).
std::string spare_key(const SandboxPolicy& p) {
  nlohmann::json env = nlohmann::json::object();
  for (const auto& [k, v] : p.env) env[k] = v;
  return nlohmann::json{{"n", to_string(p.network)}, {"l", limits_key(p.limits)}, {"r", limits_key(p.requested)},
                        {"e", env}, {"w", p.workspace_root}, {"ro", p.workspace_readonly}, {"i", p.workspace_id},
                        {"o", p.owner}, {"x", p.egress ? p.egress->to_json() : nlohmann::json()}}
      .dump();
}

// Nor one that hosts services: its data folders are bound in when it is built.
bool spare_eligible(const SandboxPolicy& p) {
  return p.isolation == Isolation::strict && p.secrets.empty() && !p.hosts_services && p.data_binds.empty();
}

}  // namespace

std::shared_ptr<Sandbox> SandboxManager::Impl::take_spare(const SandboxPolicy& policy) {
  if (!spare_eligible(policy)) return nullptr;
  const std::string key = spare_key(policy);
  std::unique_lock lock(mu);
  // A spare of this policy half built is nearer than a new one: wait for it (briefly).
  spare_ready.wait_for(lock, std::chrono::milliseconds(500), [&] { return spare_building != key || stopped; });
  auto it = spares.find(key);
  if (it == spares.end()) return nullptr;
  auto sb = it->second;
  spares.erase(it);
  if (sb->closing || sb->helper_gone) return nullptr;
  sb->spare = false;
  sb->last_used = Clock::now();
  return sb;
}

void SandboxManager::Impl::want_spare(const SandboxPolicy& policy) {
  if (!opt.warm_spares || !spare_eligible(policy) || stopped) return;
  {
    std::lock_guard lock(mu);
    if (spares.contains(spare_key(policy))) return;
    // Marked at once, so a fresh exec arriving before the thread starts waits for this build.
    if (spare_building.empty()) spare_building = spare_key(policy);
  }
  std::lock_guard lock(spare_mu);
  for (const auto& queued : spare_jobs)
    if (spare_key(queued) == spare_key(policy)) return;
  spare_jobs.push_back(policy);
  if (!spare_thread.joinable()) {
    spare_thread = std::jthread([this](std::stop_token stop) {
      for (;;) {
        SandboxPolicy job;
        {
          std::unique_lock lk(spare_mu);
          if (!spare_cv.wait(lk, stop, [&] { return !spare_jobs.empty(); })) return;
          job = std::move(spare_jobs.front());
          spare_jobs.pop_front();
        }
        const std::string key = spare_key(job);
        {
          std::lock_guard lock(mu);
          spare_building = key;
        }
        auto made = make_sandbox(std::move(job), true, stop, Admission::spare);
        if (!made) {
          std::lock_guard lock(mu);
          spare_building.clear();
          spare_ready.notify_all();
          continue;  // the next fresh exec builds its own and says why if it fails
        }
        std::shared_ptr<Sandbox> extra;
        {
          std::lock_guard lock(mu);
          spare_building.clear();
          spare_ready.notify_all();
          (*made)->spare = true;
          (*made)->spare_key = key;
          auto& slot = spares[key];
          if (slot) extra = *made;
          else slot = *made;
        }
        if (extra) retire_sandbox(extra, [](CleanupReport) {});
      }
    });
  }
  spare_cv.notify_one();
}

void SandboxManager::Impl::stop_spares() {
  {
    std::lock_guard lock(mu);
    spare_building.clear();
    spare_ready.notify_all();
  }
  if (spare_thread.joinable()) {
    spare_thread.request_stop();
    spare_cv.notify_all();
    spare_thread.join();
  }
  std::lock_guard lock(mu);
  spares.clear();  // still in `sandboxes`: destroyed with the rest
}

void SandboxManager::Impl::retire_old_spares() {
  std::vector<std::shared_ptr<Sandbox>> old;
  {
    std::lock_guard lock(mu);
    auto now = Clock::now();
    for (auto it = spares.begin(); it != spares.end();) {
      if (now - it->second->created >= kSpareTtl || it->second->helper_gone) {
        old.push_back(it->second);
        it = spares.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& sb : old) retire_sandbox(sb, [](CleanupReport) {});
}

void SandboxManager::Impl::retire_all_spares() {
  std::vector<std::shared_ptr<Sandbox>> all;
  {
    std::lock_guard lock(mu);
    for (auto& [key, sb] : spares) all.push_back(sb);
    spares.clear();
  }
  for (auto& sb : all) retire_sandbox(sb, [](CleanupReport) {});
}

}  // namespace kiln::sandbox
