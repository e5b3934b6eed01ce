// The decisions of the egress proxy for one run, as its trace shows them (`network_log`): every
// connection asked for, allowed or denied, why, and the bytes each way. Bounded: past kMaxEntries
// only counts are kept.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kiln::egress {

struct LogEntry {
  std::string host;
  int port = 0;
  bool allowed = false;
  std::string reason;
  std::string kind;     // "connect" (a tunnel) or "http" (an absolute-form request); "bad_request"
  std::string method;   // http only
  std::string address;  // the address connected to (allowed only)
  std::string error;    // an allowed connection that then failed (resolve, connect)
  std::uint64_t bytes_up = 0, bytes_down = 0;
  std::string at;       // ISO 8601 UTC, when it was decided
  bool open = true;     // still relaying
};

class NetworkLog {
 public:
  static constexpr std::size_t kMaxEntries = 1000;
  // Returns the entry's index for update(), or npos when only counted.
  std::size_t add(LogEntry e);
  void update(std::size_t index, std::uint64_t up, std::uint64_t down, const std::string& error, bool open);
  nlohmann::json to_json() const;        // the entries
  nlohmann::json summary_json() const;   // counts and totals, every connection included
  bool empty() const;

 private:
  mutable std::mutex mu_;
  std::vector<LogEntry> entries_;
  std::uint64_t allowed_ = 0, denied_ = 0, dropped_ = 0, up_ = 0, down_ = 0;
};

std::string now_iso8601_ms();

}  // namespace kiln::egress
