// Published apps' lifecycle in one place (TOOLS.md, apps): each app runs from its version's
// immutable copy in a strict sandbox with its services and a data folder kept per artifact; it
// starts on deploy or on the first request, sleeps after idle_s, wakes on a request, restarts with
// backoff after a crash, comes back when `kiln serve` restarts, and runs its schedules.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/unique_fd.h"
#include "http/proxy.h"

namespace kiln::artifacts { class ArtifactStore; }
namespace kiln::sandbox { class SandboxManager; }
namespace kiln::services { class ServiceHost; }
namespace kiln::server { class RunTracer; }

namespace kiln::server::apps {

struct SupervisorOptions {
  std::string state_dir;
  std::string principal;  // whom app sandboxes and traces belong to (the local user)
  std::string base_url;   // "http://127.0.0.1:7700": status answers carry url = base_url + "/a/NAME/"
  artifacts::ArtifactStore* store = nullptr;
  sandbox::SandboxManager* sandboxes = nullptr;
  services::ServiceHost* services = nullptr;
  RunTracer* tracer = nullptr;
};

// What a request to an app gets from acquire(): a socket to the app, or why not.
struct Upstream {
  http::UpstreamSocket fd;  // connected (or connecting) to the app's port inside its sandbox
  int status = 0;       // when fd is empty: 502 (crashed), 503 (not up in time, at capacity), 404
  std::string why;      // a sentence for the plain error page
  int retry_after_s = 0;
  int max_wait_s = 60;  // the app's request_timeout_s, for the proxy's response timeout
  bool reused = false;  // fd came from the idle pool (the app may have closed it since)
};

class Supervisor {
 public:
  static Result<std::unique_ptr<Supervisor>> open(SupervisorOptions options);
  ~Supervisor();
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  // Loads every app artifact, starts the ones that were awake (or always on) and the ticker that
  // puts idle apps to sleep, restarts crashed ones and fires schedules (catching up missed ones).
  void start();
  // Before start(): the URL status answers give (known once the listener is bound).
  void set_base_url(std::string url);
  // Stops every app cleanly (services get a fast shutdown), keeping all data.
  void shutdown();

  // Quick and in memory, for the front door on an io thread.
  bool is_app(std::string_view name) const;
  // Whether its web process runs now (a request needs no wake-up), also quick.
  bool running(std::string_view name) const;

  // A connection for one request to `name`, waking the app if it sleeps. `ready` runs exactly
  // once, on any thread, possibly seconds later.
  void acquire(const std::string& name, std::function<void(Upstream)> ready);
  // A new connection for an exchange acquire() already counts, whose pooled fd was stale.
  Result<UniqueFd> reconnect(const std::string& name);
  // Once per acquired fd's exchange: `reusable` (a keep-alive socket) goes back to the pool.
  void release(const std::string& name, http::UpstreamSocket reusable, bool upstream_failed);

  // The control API (serve/app_control.cpp). Each may block for as long as the app takes to
  // start or a schedule takes to run; call off the io threads.
  Result<nlohmann::json> status(const std::string& name);
  nlohmann::json list();
  Result<nlohmann::json> deploy(const std::string& name);
  Result<nlohmann::json> restart(const std::string& name);
  Result<nlohmann::json> run_schedule(const std::string& name, const std::string& schedule);
  Result<nlohmann::json> stop(const std::string& name, bool delete_data);
  Result<nlohmann::json> export_data(const std::string& name);

  struct Impl;

 private:
  explicit Supervisor(std::shared_ptr<Impl> impl);
  std::shared_ptr<Impl> impl_;
};

}  // namespace kiln::server::apps
