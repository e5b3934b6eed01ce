// The records ServiceHost keeps, shared by its two files (service_host.cpp: the lifecycle;
// postgres_bootstrap.cpp: postgres's databases and setup). Not for other layers.
#pragma once

#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "services/recipes.h"
#include "services/service_host.h"

namespace kiln::services {

struct ServiceHost::Prepared {
  ServiceRequest request;
  struct Entry {
    server::ServiceConfig config;
    Recipe recipe;
    std::string bin;  // postgres bin folder or redis-server
    std::optional<DataFolder> data;
    std::string database;  // postgres: what execs connect to
  };
  std::vector<Entry> entries;
};

struct ServiceHost::Hosted {
  std::string sandbox_id;
  std::string owner;
  ServiceRequest request;
  std::vector<Prepared::Entry> entries;
  mutable std::mutex mu;
  std::vector<ServiceStatus> status;  // parallel to entries
  std::vector<bool> stopping;         // a stop Kiln asked for: its end is "stopped", not "failed"
  std::vector<bool> needs_bootstrap;  // postgres: the readiness probe did not find its database
  std::vector<int> generation;        // bumped per start: an earlier incarnation's end is ignored
};

// "exited with code 3", "was killed by signal 9", "stopped (memory_limit)".
std::string describe(const sandbox::ExecResult& r);

}  // namespace kiln::services
