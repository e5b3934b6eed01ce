// Warm spare sandboxes. Building a strict sandbox (helper, namespaces, mounts, seccomp, Landlock,
// cgroups) costs most of a fresh exec; agents run fresh execs with the same policy again and
// again, alone or in parallel bursts, so the next ones are built while nobody waits: every fresh
// exec that finishes asks for one spare of its policy. A spare is only ever used once, for the
// exact policy it was made for, and is destroyed after a minute unused.
#include <algorithm>
#include <chrono>
#include <iterator>

#include <nlohmann/json.hpp>

#include "sandbox/manager_impl.h"

namespace kiln::sandbox {

namespace {

constexpr auto kSpareTtl = std::chrono::seconds(60);
constexpr int kRoomRetries = 250;  // 20 ms apart: 5 s of waiting for closing sandboxes' room

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
  // The spares hold the workspace folder that was at its path when they were built: if another
  // folder is there now (moved away, deleted and made again), they all show the old one.
  auto now_there = workspace_identity(policy.workspace_root);
  std::shared_ptr<Sandbox> taken;
  std::vector<std::shared_ptr<Sandbox>> unusable;
  {
    std::unique_lock lock(mu);
    // A spare of this policy half built is nearer than a new one: wait for it (briefly).
    spare_ready.wait_for(lock, std::chrono::milliseconds(500),
                         [&] { return spares.contains(key) || spare_building != key || stopped; });
    while (!taken) {
      auto it = spares.find(key);
      if (it == spares.end()) break;
      auto sb = std::move(it->second.back());
      it->second.pop_back();
      if (it->second.empty()) spares.erase(it);
      --spare_count;
      // Its helper died while it waited, or it shows a folder no longer at the path: the next one.
      if (sb->closing || sb->helper_gone || !now_there || now_there->dev != sb->workspace.dev ||
          now_there->ino != sb->workspace.ino) {
        unusable.push_back(std::move(sb));
        continue;
      }
      sb->spare = false;
      sb->last_used = Clock::now();
      taken = std::move(sb);
    }
  }
  for (auto& sb : unusable)
    if (!sb->closing) retire_sandbox(sb, [](CleanupReport) {});
  return taken;
}

std::size_t SandboxManager::Impl::spare_cap() const {
  // Spares never take the last quarter of the server's sandbox slots: a session sandbox or another
  // policy's fresh exec finds room without waiting for idle spares to be retired.
  return budget.ceilings().max_sandboxes * 3 / 4;
}

void SandboxManager::Impl::want_spare(const SandboxPolicy& policy) {
  if (!opt.warm_spares || !spare_eligible(policy) || stopped) return;
  std::size_t ready;
  {
    std::lock_guard lock(mu);
    ready = spare_count;
  }
  std::lock_guard lock(spare_mu);
  if (spares_stopped || ready + spare_jobs.size() + 1 > spare_cap()) return;
  spare_jobs.push_back(policy);
  if (!spare_thread.joinable()) {
    spare_thread = std::jthread([this](std::stop_token stop) {
      int retries = 0;
      for (;;) {
        SandboxPolicy job;
        {
          std::unique_lock lk(spare_mu);
          if (!spare_cv.wait(lk, stop, [&] { return !spare_jobs.empty(); })) return;
          // Not while a fresh exec builds its own: its caller is waiting, a spare's is not yet.
          while (cold_builds.load() > 0 && !stop.stop_requested())
            spare_cv.wait_for(lk, stop, std::chrono::milliseconds(20), [&] { return cold_builds.load() == 0; });
          if (stop.stop_requested()) return;
          job = spare_jobs.front();  // left queued while it is built: it counts against the cap
        }
        const std::string key = spare_key(job);
        {
          std::lock_guard lock(mu);
          spare_building = key;
        }
        auto made = make_sandbox(job, true, stop, Admission::spare);
        bool closing = false;
        {
          std::lock_guard lock(mu);
          spare_building.clear();
          spare_ready.notify_all();
          if (made) {
            (*made)->spare = true;
            (*made)->spare_key = key;
            spares[key].push_back(*made);
            ++spare_count;
          } else {
            closing = std::ranges::any_of(sandboxes, [](const auto& e) { return e.second->closing.load(); });
          }
        }
        std::unique_lock lk(spare_mu);
        // After a burst the room is held by its sandboxes until their clean-up ends: try again
        // while some are closing. Any other failure: the next fresh exec builds its own and says
        // why if it fails.
        if (!made && made.error().code == Errc::too_large && closing && retries++ < kRoomRetries) {
          spare_cv.wait_for(lk, stop, std::chrono::milliseconds(20), [] { return false; });
          continue;
        }
        retries = 0;
        if (!spare_jobs.empty()) spare_jobs.pop_front();
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
  std::jthread thread;
  {
    std::lock_guard lock(spare_mu);
    spares_stopped = true;  // the queue stays: the thread pops the job it is building when done
    thread = std::move(spare_thread);
  }
  if (thread.joinable()) {
    thread.request_stop();
    spare_cv.notify_all();
    thread.join();
  }
  std::lock_guard lock(mu);
  // Still in `sandboxes`: destroyed with the rest, which destroy() finds only once they are no
  // longer idle spares (nobody can address an idle spare).
  for (auto& [key, ready] : spares)
    for (auto& sb : ready) sb->spare = false;
  spares.clear();
  spare_count = 0;
}

void SandboxManager::Impl::retire_old_spares() {
  std::vector<std::shared_ptr<Sandbox>> old;
  {
    std::lock_guard lock(mu);
    auto now = Clock::now();
    for (auto it = spares.begin(); it != spares.end();) {
      std::erase_if(it->second, [&](const std::shared_ptr<Sandbox>& sb) {
        if (now - sb->created < kSpareTtl && !sb->helper_gone) return false;
        old.push_back(sb);
        --spare_count;
        return true;
      });
      it = it->second.empty() ? spares.erase(it) : std::next(it);
    }
  }
  for (auto& sb : old) retire_sandbox(sb, [](CleanupReport) {});
}

void SandboxManager::Impl::retire_all_spares() {
  std::vector<std::shared_ptr<Sandbox>> all;
  {
    std::lock_guard lock(mu);
    for (auto& [key, ready] : spares) all.insert(all.end(), ready.begin(), ready.end());
    spares.clear();
    spare_count = 0;
  }
  for (auto& sb : all) retire_sandbox(sb, [](CleanupReport) {});
}

}  // namespace kiln::sandbox
