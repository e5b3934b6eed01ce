// Where the host's database servers are: Debian's PostgreSQL (/usr/lib/postgresql/<major>/bin) and
// redis-server. Services run the host's own binaries inside the sandbox (read-only under /usr), so a
// missing one is an error that names the Debian package to install.
#pragma once

#include <string>

#include "core/error.h"

namespace kiln::services {

struct PostgresBinaries {
  std::string bindir;  // holds initdb, postgres, pg_isready, psql
  std::string major;   // "15"
};

// KILN_POSTGRES_BINDIR overrides the search (a self-built PostgreSQL, or a test of the error).
Result<PostgresBinaries> find_postgres();

// KILN_REDIS_SERVER overrides the search of /usr/bin and /usr/local/bin.
Result<std::string> find_redis_server();

}  // namespace kiln::services
