// The services of every live sandbox: started when a sandbox is created with them (or when verify
// needs them), checked for readiness, bootstrapped (postgres: a database per use, `setup` once),
// listed and restarted, and let go with their data locks when the sandbox is gone.
//
// Two steps around sandbox creation, because a service's data folder and the sandbox's loopback are
// part of how the sandbox is built: prepare() locks the data and adds to the policy what the
// services need, then start() runs them in the sandbox and returns when every one is ready.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "sandbox/manager.h"
#include "services/data_folder.h"
#include "workspace/kiln_config.h"

namespace kiln::server { class RunTracer; }

namespace kiln::services {

struct ServiceStatus {
  std::string name;
  std::string kind;   // postgres | redis | command
  std::string state;  // starting | ready | failed | stopped
  std::string url;
  int port = 0;
  int pid = 0;        // inside the sandbox
  int restarts = 0;
  std::string run_id;
  std::string trace_id;
  std::string database;  // postgres: the database execs connect to
  std::string error;     // why it failed
};
nlohmann::json to_json(const ServiceStatus& s);

struct ServiceRequest {
  const server::KilnConfig* config = nullptr;  // the workspace's kiln.json, with its services
  std::vector<std::string> names;              // which of them
  DataUse use = DataUse::development;
  // Where the services' data folders go; empty: <state>/services/<workspace_id>.
  std::string data_base;
  std::string workspace_id;
  std::string workspace_root;
  std::string owner;
  nlohmann::json client = nullptr;
  std::optional<std::string> parent_trace;     // a verify's trace: the services' traces hang below it
};

class ServiceHost {
 public:
  ServiceHost(sandbox::SandboxManager& sandboxes, server::RunTracer* tracer, std::string state_dir);
  ~ServiceHost();
  ServiceHost(const ServiceHost&) = delete;
  ServiceHost& operator=(const ServiceHost&) = delete;

  struct Prepared;

  // Checks the names and the host's binaries, locks the data folders, and adds to `policy` what
  // the services need: hosts_services, their data binds, and the connection variables.
  // A verify waits there for another verify's template until `stop`.
  Result<std::shared_ptr<Prepared>> prepare(const ServiceRequest& request, sandbox::SandboxPolicy& policy,
                                            std::stop_token stop = {});

  // Starts the prepared services in the new sandbox and waits until each is ready. An error names
  // the service and quotes its last log lines; the caller then destroys the sandbox.
  Result<std::vector<ServiceStatus>> start(std::shared_ptr<Prepared> prepared, const std::string& sandbox_id,
                                           std::stop_token stop);

  // Empty when the sandbox (of this owner) hosts no services.
  std::vector<ServiceStatus> list(const std::string& owner, const std::string& sandbox_id) const;
  Result<ServiceStatus> restart(const std::string& owner, const std::string& sandbox_id, const std::string& name,
                                std::stop_token stop);
  // Asks each service to shut down cleanly (postgres: fast shutdown) and waits a few seconds;
  // before sandbox_destroy, so a cluster needs no crash recovery next time.
  void stop_all(const std::string& owner, const std::string& sandbox_id);

  struct Hosted;

 private:
  Result<void> launch(Hosted& h, std::size_t index, std::stop_token stop);
  Result<void> wait_ready(Hosted& h, std::size_t index, std::stop_token stop);
  Result<void> bootstrap_postgres(Hosted& h, std::size_t index, std::stop_token stop);
  Result<std::string> psql(Hosted& h, std::size_t index, const std::string& database, const std::string& sql,
                           std::stop_token stop);
  std::string last_lines(const Hosted& h, std::size_t index) const;
  std::shared_ptr<Hosted> find(const std::string& owner, const std::string& sandbox_id) const;

  sandbox::SandboxManager& sandboxes_;
  server::RunTracer* tracer_;
  std::string state_dir_;
  // Shared with the manager's sandbox-gone listener, which may outlive this object.
  struct State {
    std::mutex mu;
    std::map<std::string, std::shared_ptr<Hosted>> hosted;  // by sandbox id
  };
  std::shared_ptr<State> state_;
};

}  // namespace kiln::services
