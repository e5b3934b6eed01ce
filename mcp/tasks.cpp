// The task registry: one thread per task, outcomes kept for their time to live.
#include "mcp/tasks.h"

#include <sodium.h>

#include <algorithm>

#include <fmt/chrono.h>
#include <fmt/format.h>

#include "core/random_hex.h"

namespace kiln::server {

using Clock = std::chrono::system_clock;

struct TaskRegistry::Entry {
  std::string principal;
  TaskSnapshot snap;
  Clock::time_point expires;  // terminal and past this: forgotten
  std::stop_source stop;
  std::thread thread;
  bool done = false;  // the work returned (the thread can be joined)
};

namespace {

std::string iso_now() {
  auto now = Clock::now();
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  return fmt::format("{:%Y-%m-%dT%H:%M:%S}.{:03d}Z", std::chrono::floor<std::chrono::seconds>(now), ms);
}

std::string new_task_id() { return "task-" + random_hex(16); }

}  // namespace

TaskRegistry::~TaskRegistry() {
  std::vector<std::shared_ptr<Entry>> all;
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    for (auto& [id, e] : tasks_) all.push_back(e);
  }
  // Outside the lock, as in cancel().
  for (auto& e : all) e->stop.request_stop();
  changed_.notify_all();
  for (auto& e : all) {
    if (e->thread.joinable()) e->thread.join();
  }
}

TaskSnapshot TaskRegistry::snapshot_locked(const Entry& e) const { return e.snap; }

void TaskRegistry::reap_locked(std::vector<std::thread>& joinable) {
  auto now = Clock::now();
  for (auto it = tasks_.begin(); it != tasks_.end();) {
    Entry& e = *it->second;
    if (e.done && e.thread.joinable()) joinable.push_back(std::move(e.thread));
    if (e.done && e.snap.terminal() && now >= e.expires) {
      it = tasks_.erase(it);
    } else {
      ++it;
    }
  }
}

std::optional<TaskSnapshot> TaskRegistry::start(const std::string& principal, std::optional<std::int64_t> ttl_ms,
                                                Work work) {
  if (sodium_init() < 0) return std::nullopt;
  auto e = std::make_shared<Entry>();
  e->principal = principal;
  e->snap.id = new_task_id();
  e->snap.status = "working";
  e->snap.created_at = e->snap.updated_at = iso_now();
  e->snap.ttl_ms = std::clamp<std::int64_t>(ttl_ms.value_or(kDefaultTtlMs), 1000, kMaxTtlMs);
  e->snap.poll_ms = kPollMs;
  e->expires = Clock::now() + std::chrono::milliseconds(e->snap.ttl_ms);
  std::vector<std::thread> joinable;
  TaskSnapshot first;
  {
    std::lock_guard lock(mu_);
    if (stopping_) return std::nullopt;
    reap_locked(joinable);
    std::size_t running = 0;
    std::vector<std::map<std::string, std::shared_ptr<Entry>>::iterator> finished;
    for (auto it = tasks_.begin(); it != tasks_.end(); ++it) {
      if (it->second->principal != principal) continue;
      if (!it->second->done) ++running;
      else if (it->second->snap.terminal()) finished.push_back(it);
    }
    if (running >= kMaxRunningPerPrincipal) return std::nullopt;
    if (finished.size() >= kMaxKeptPerPrincipal) {
      // Oldest first (ISO timestamps sort as text); their threads were joined by reap_locked.
      std::ranges::sort(finished, {}, [](const auto& it) { return it->second->snap.updated_at; });
      for (std::size_t i = 0; i + kMaxKeptPerPrincipal <= finished.size(); ++i) {
        if (!finished[i]->second->thread.joinable()) tasks_.erase(finished[i]);
      }
    }
    tasks_[e->snap.id] = e;
    first = e->snap;
    std::weak_ptr<Entry> weak = e;
    // Started under the lock, so the entry is complete (thread included) before anyone sees it.
    e->thread = std::thread([this, weak, work = std::move(work), token = e->stop.get_token()] {
      auto status = [this, weak](std::string text) {
        std::optional<std::pair<std::string, TaskSnapshot>> changed;
        {
          std::lock_guard lock(mu_);
          if (auto en = weak.lock(); en && en->snap.status == "working" && en->snap.status_message != text) {
            en->snap.status_message = std::move(text);
            en->snap.updated_at = iso_now();
            changed.emplace(en->principal, en->snap);
          }
        }
        if (changed) notify(changed->first, changed->second);
      };
      MethodResult outcome;
      try {
        outcome = work(token, status);
      } catch (const std::exception& ex) {
        outcome = std::unexpected(RpcError{-32603, std::string("Internal error: ") + ex.what()});
      }
      std::optional<std::pair<std::string, TaskSnapshot>> ended;
      {
        std::lock_guard lock(mu_);
        if (auto en = weak.lock()) {
          if (en->snap.status == "working") {  // a cancellation already settled it otherwise
            if (outcome) {
              en->snap.status = "completed";
              en->snap.result = std::move(*outcome);
            } else {
              en->snap.status = "failed";
              en->snap.error = outcome.error();
              en->snap.status_message = outcome.error().message;
            }
            en->snap.updated_at = iso_now();
            ended.emplace(en->principal, en->snap);
          }
          // Kept at least a minute after it ends, whatever the TTL, so a poller sees the outcome.
          en->expires = std::max(en->expires, Clock::now() + std::chrono::minutes(1));
          en->done = true;
        }
      }
      changed_.notify_all();
      if (ended) notify(ended->first, ended->second);
    });
  }
  for (auto& t : joinable) t.join();
  return first;
}

std::optional<TaskSnapshot> TaskRegistry::get(const std::string& principal, const std::string& id) {
  std::lock_guard lock(mu_);
  auto it = tasks_.find(id);
  if (it == tasks_.end() || it->second->principal != principal) return std::nullopt;
  return snapshot_locked(*it->second);
}

std::optional<TaskSnapshot> TaskRegistry::wait(const std::string& principal, const std::string& id,
                                               std::stop_token stop) {
  std::unique_lock lock(mu_);
  auto it = tasks_.find(id);
  if (it == tasks_.end() || it->second->principal != principal) return std::nullopt;
  auto e = it->second;
  changed_.wait(lock, stop, [&] { return e->snap.terminal() || stopping_; });
  return snapshot_locked(*e);
}

TaskRegistry::Cancel TaskRegistry::cancel(const std::string& principal, const std::string& id, TaskSnapshot* after) {
  TaskSnapshot now;
  std::stop_source stop;
  {
    std::lock_guard lock(mu_);
    auto it = tasks_.find(id);
    if (it == tasks_.end() || it->second->principal != principal) return Cancel::unknown;
    Entry& e = *it->second;
    if (e.snap.terminal()) {
      if (after) *after = e.snap;
      return Cancel::already_terminal;
    }
    e.snap.status = "cancelled";
    e.snap.status_message = "cancelled by the client";
    e.snap.updated_at = iso_now();
    stop = e.stop;
    if (after) *after = e.snap;
    now = e.snap;
  }
  // Outside the lock: request_stop runs the work's stop callbacks on this thread, and they may
  // wait for a thread that is itself waiting for this lock (a status line, the task's end).
  stop.request_stop();
  changed_.notify_all();
  notify(principal, now);
  return Cancel::requested;
}

bool TaskRegistry::cancel_all(std::chrono::milliseconds limit) {
  std::vector<std::shared_ptr<Entry>> working;
  {
    std::lock_guard lock(mu_);
    for (auto& [id, e] : tasks_) {
      if (e->done) continue;
      working.push_back(e);
      if (e->snap.status != "working") continue;
      e->snap.status = "cancelled";
      e->snap.status_message = "cancelled: the server stopped";
      e->snap.updated_at = iso_now();
    }
  }
  for (auto& e : working) e->stop.request_stop();  // outside the lock, as in cancel()
  changed_.notify_all();
  std::unique_lock lock(mu_);
  return changed_.wait_for(lock, limit, [&] {
    return std::ranges::all_of(working, [](const auto& e) { return e->done; });
  });
}

std::vector<TaskSnapshot> TaskRegistry::list(const std::string& principal) {
  std::vector<TaskSnapshot> out;
  std::lock_guard lock(mu_);
  for (const auto& [id, e] : tasks_) {
    if (e->principal == principal) out.push_back(e->snap);
  }
  return out;
}

}  // namespace kiln::server
