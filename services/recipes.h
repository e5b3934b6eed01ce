// How each kind of service is started, checked for readiness and reached: the commands that run
// inside the sandbox and the connection settings its other commands get. No processes here.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "workspace/kiln_config.h"

namespace kiln::services {

// Where a service's data folder appears inside the sandbox (only postgres has one).
std::string data_target(const std::string& service);

// The database an exec connects to: the development database, or this verify run's clone.
inline constexpr const char* kDevDatabase = "app";
inline constexpr const char* kTemplateDatabase = "kiln_template";

struct Recipe {
  std::vector<std::string> start;  // the service's own process (runs in the foreground, in the background run)
  std::string display;             // for traces and listings
  std::string url;                 // how the other commands reach it
  std::string bindir;              // postgres: its bin folder (for psql in later steps)
};

// `bin` is the postgres bin folder or the redis-server path (unused for kind command).
Recipe make_recipe(const server::ServiceConfig& s, const std::string& bin);

// A readiness check run inside the sandbox: exits 0 once the service answers, 3 as soon as the
// process `pid` is gone (so a crash is reported at once, not at the timeout). For postgres with a
// `database` (a name Kiln chose, never user text): 0 when it exists, 4 when it does not yet.
std::vector<std::string> probe_command(const server::ServiceConfig& s, const std::string& bin, int pid,
                                       const std::string& database = {});

// psql running `sql` against `database` of the postgres service, as the superuser; -tA output.
std::vector<std::string> psql_command(const server::ServiceConfig& s, const std::string& bindir,
                                      const std::string& database, const std::string& sql);

// DATABASE_URL, PG*, REDIS_URL and KILN_SERVICE_<NAME>_URL for the services in `all` (the first
// postgres gets the unprefixed names), with postgres pointing at `database_of[name]`.
std::map<std::string, std::string> connection_env(const std::vector<const server::ServiceConfig*>& all,
                                                  const std::map<std::string, std::string>& database_of);

std::string postgres_url(const server::ServiceConfig& s, const std::string& database);

// The env var form of a service name (kiln_config's one rule).
inline std::string env_name(const std::string& service) { return server::service_env_name(service); }

}  // namespace kiln::services
