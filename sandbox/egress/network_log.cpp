// Storage of the egress decisions of one run (see network_log.h).
#include "sandbox/egress/network_log.h"

#include <chrono>
#include <ctime>

#include <fmt/format.h>

namespace kiln::egress {

using nlohmann::json;

std::string now_iso8601_ms() {
  auto now = std::chrono::system_clock::now();
  auto t = std::chrono::system_clock::to_time_t(now);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                     tm.tm_hour, tm.tm_min, tm.tm_sec, ms);
}

std::size_t NetworkLog::add(LogEntry e) {
  std::lock_guard lock(mu_);
  (e.allowed ? allowed_ : denied_)++;
  up_ += e.bytes_up;
  down_ += e.bytes_down;
  if (entries_.size() >= kMaxEntries) {
    ++dropped_;
    return std::string::npos;
  }
  entries_.push_back(std::move(e));
  return entries_.size() - 1;
}

void NetworkLog::update(std::size_t index, std::uint64_t up, std::uint64_t down, const std::string& error, bool open) {
  std::lock_guard lock(mu_);
  if (index >= entries_.size()) return;  // past the cap nothing is updated (see Connection::begin_relay)
  auto& e = entries_[index];
  up_ += up - e.bytes_up;
  down_ += down - e.bytes_down;
  e.bytes_up = up;
  e.bytes_down = down;
  if (!error.empty()) e.error = error;
  e.open = open;
}

json NetworkLog::to_json() const {
  std::lock_guard lock(mu_);
  json out = json::array();
  for (const auto& e : entries_) {
    json j = {{"host", e.host},
              {"port", e.port},
              {"decision", e.allowed ? "allowed" : "denied"},
              {"reason", e.reason},
              {"kind", e.kind},
              {"bytes_up", e.bytes_up},
              {"bytes_down", e.bytes_down},
              {"at", e.at}};
    if (!e.method.empty()) j["method"] = e.method;
    if (!e.address.empty()) j["address"] = e.address;
    if (!e.error.empty()) j["error"] = e.error;
    if (e.allowed && e.open) j["open"] = true;
    out.push_back(std::move(j));
  }
  return out;
}

json NetworkLog::summary_json() const {
  std::lock_guard lock(mu_);
  return json{{"allowed", allowed_}, {"denied", denied_}, {"not_listed", dropped_}, {"bytes_up", up_},
              {"bytes_down", down_}};
}

bool NetworkLog::empty() const {
  std::lock_guard lock(mu_);
  return allowed_ + denied_ == 0;
}

}  // namespace kiln::egress
