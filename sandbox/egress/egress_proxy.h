// Kiln's egress proxy, on the sandbox manager's Asio loop. A sandbox's pid 1 accepts each
// connection on the sandbox's own loopback and hands the socket over; this side reads the request,
// decides by the allowlist, resolves the name itself, checks every address, connects to the checked
// one (never resolving again) and relays. Asio stays out of this header.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <vector>
#include <string>

#include "core/unique_fd.h"
#include "sandbox/egress/egress_policy.h"
#include "sandbox/egress/network_log.h"

namespace boost::asio {
class io_context;
}

namespace kiln::egress {

class Connection;

// What one sandbox may reach, and its live connections (closed when the sandbox goes).
class SandboxEgress {
 public:
  explicit SandboxEgress(Scope scope) : scope_(std::move(scope)) {}
  const Scope& scope() const { return scope_; }
  // Closes every connection still relaying (io thread).
  void close_all();

 private:
  friend class Connection;
  Scope scope_;
  friend class EgressProxy;
  std::vector<std::weak_ptr<Connection>> live_;  // io thread only
  bool closed_ = false;
};

struct ProxyOptions {
  // A hosts(5)-format file consulted before DNS (KILN_EGRESS_HOSTS): lets tests and operators map
  // names without editing /etc/hosts. Re-read when it changes.
  std::string hosts_file;
  std::chrono::milliseconds head_timeout{30000};
  std::chrono::milliseconds connect_timeout{10000};
  std::size_t max_connections_per_sandbox = 1024;
  // Across all sandboxes. A relayed connection holds six descriptors of Kiln's process (two
  // sockets, two pipes); left unbounded, one sandbox opening connections would exhaust Kiln's open
  // files and fail every tool. 0: half of RLIMIT_NOFILE's soft limit, six per connection. No
  // sandbox may hold more than a quarter of it (at least 8).
  std::size_t max_connections_total = 0;
};

class EgressProxy {
 public:
  EgressProxy(boost::asio::io_context& io, ProxyOptions options);
  ~EgressProxy();
  // Takes a connected TCP socket from inside the sandbox (io thread). `log` may be null (the
  // decisions then only count in the sandbox's totals).
  void serve(UniqueFd client, const std::shared_ptr<SandboxEgress>& sandbox, const std::shared_ptr<NetworkLog>& log);

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

// How the proxy is reached from inside, for the isolation report and the docs.
const char* enforcement_text();

}  // namespace kiln::egress
