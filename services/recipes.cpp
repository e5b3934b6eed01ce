// The commands behind each kind of service. Values reach the shell scripts as positional
// parameters ("$1"...), never spliced into the script text, so no name or path can inject code.
#include "services/recipes.h"

#include <fmt/format.h>

namespace kiln::services {

using server::ServiceConfig;
using server::ServiceKind;

namespace {

// A throw-away development cluster: no fsync (a crash of the machine may lose it; a kill of the
// server does not, commits still reach the kernel), TCP on the sandbox's loopback only, trust
// authentication (nothing else can reach that loopback), and the data folder made once.
constexpr const char* kPostgresStart = R"(set -eu
data="$1/pgdata"
if [ ! -f "$1/initialized" ]; then
  rm -rf "$data"
  "$2/initdb" -D "$data" -U postgres -A trust -E UTF8 --no-locale --no-sync --no-instructions
  : > "$1/initialized"
fi
# Kiln holds this cluster's lock, so no other postmaster can be using it: a pid file left by a
# killed sandbox names a pid of a namespace that is gone.
rm -f "$data/postmaster.pid"
exec "$2/postgres" -D "$data" -h 127.0.0.1 -p "$3" -k /tmp -c fsync=off -c full_page_writes=off \
  -c wal_level=minimal -c max_wal_senders=0 -c max_connections=40 -c shared_buffers=32MB \
  -c max_wal_size=256MB -c checkpoint_timeout=30min -c dynamic_shared_memory_type=posix \
  -c log_line_prefix='%m [%p] ' -c log_min_messages=warning
)";

// Each probe loop stops with 3 once the service's process is gone ("$1" is its pid).
// Once postgres answers, also says whether the database "$4" exists yet (exit 0) or not (4), so a
// warm start needs no second exec to find out.
constexpr const char* kPostgresProbe = R"(while kill -0 "$1" 2>/dev/null; do
  if "$2/pg_isready" -q -h 127.0.0.1 -p "$3"; then
    [ -z "$4" ] && exit 0
    found=$("$2/psql" -X -tA -h 127.0.0.1 -p "$3" -U postgres -d postgres \
      -c "SELECT 1 FROM pg_database WHERE datname = '$4'" 2>/dev/null) || { sleep 0.01; continue; }
    [ "$found" = 1 ] && exit 0
    exit 4
  fi
  sleep 0.01
done
exit 3
)";

constexpr const char* kRedisProbe = R"(while kill -0 "$1" 2>/dev/null; do
  ( exec 3<>"/dev/tcp/127.0.0.1/$2" && printf 'PING\r\n' >&3 && read -r -t 2 r <&3 && [ "${r%$'\r'}" = "+PONG" ] ) 2>/dev/null && exit 0
  sleep 0.02
done
exit 3
)";

constexpr const char* kTcpProbe = R"(while kill -0 "$1" 2>/dev/null; do
  ( exec 3<>"/dev/tcp/127.0.0.1/$2" ) 2>/dev/null && exit 0
  sleep 0.02
done
exit 3
)";

constexpr const char* kHttpProbe = R"(while kill -0 "$1" 2>/dev/null; do
  ( exec 3<>"/dev/tcp/127.0.0.1/$2" &&
    printf 'GET %s HTTP/1.0\r\nHost: 127.0.0.1:%s\r\nConnection: close\r\n\r\n' "$3" "$2" >&3 &&
    read -r -t 5 version code rest <&3 && case "$code" in 2??|3??) exit 0 ;; *) exit 1 ;; esac ) 2>/dev/null && exit 0
  sleep 0.02
done
exit 3
)";

}  // namespace

std::string data_target(const std::string& service) { return "/var/lib/kiln/services/" + service; }

std::string postgres_url(const ServiceConfig& s, const std::string& database) {
  return fmt::format("postgres://postgres@127.0.0.1:{}/{}", s.port, database);
}

Recipe make_recipe(const ServiceConfig& s, const std::string& bin) {
  Recipe r;
  const std::string port = std::to_string(s.port);
  switch (s.kind) {
    case ServiceKind::postgres:
      r.start = {"/bin/sh", "-c", kPostgresStart, "kiln-postgres", data_target(s.name), bin, port};
      r.display = fmt::format("postgres -D {}/pgdata -p {} (initdb once)", data_target(s.name), port);
      r.url = postgres_url(s, kDevDatabase);
      r.bindir = bin;
      break;
    case ServiceKind::redis:
      r.start = {bin, "--bind", "127.0.0.1", "--port", port, "--save", "", "--appendonly", "no",
                 "--protected-mode", "no", "--daemonize", "no", "--dir", "/tmp"};
      r.display = fmt::format("redis-server --port {}", port);
      r.url = fmt::format("redis://127.0.0.1:{}", port);
      break;
    case ServiceKind::command:
      r.start = s.argv;
      r.display = s.display;
      r.url = fmt::format("http://127.0.0.1:{}", port);
      break;
  }
  return r;
}

std::vector<std::string> probe_command(const ServiceConfig& s, const std::string& bin, int pid,
                                       const std::string& database) {
  const std::string p = std::to_string(pid), port = std::to_string(s.port);
  switch (s.kind) {
    case ServiceKind::postgres: return {"/bin/sh", "-c", kPostgresProbe, "kiln-probe", p, bin, port, database};
    case ServiceKind::redis: return {"/bin/bash", "-c", kRedisProbe, "kiln-probe", p, port};
    case ServiceKind::command:
      if (s.ready_path.empty()) return {"/bin/bash", "-c", kTcpProbe, "kiln-probe", p, port};
      return {"/bin/bash", "-c", kHttpProbe, "kiln-probe", p, port, s.ready_path};
  }
  return {};
}

std::vector<std::string> psql_command(const ServiceConfig& s, const std::string& bindir, const std::string& database,
                                      const std::string& sql) {
  return {bindir + "/psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-tA", "-h", "127.0.0.1", "-p",
          std::to_string(s.port), "-U", "postgres", "-d", database, "-c", sql};
}

std::map<std::string, std::string> connection_env(const std::vector<const ServiceConfig*>& all,
                                                  const std::map<std::string, std::string>& database_of) {
  std::map<std::string, std::string> env;
  bool have_pg = false, have_redis = false;
  for (const auto* s : all) {
    const std::string upper = env_name(s->name);
    if (s->kind == ServiceKind::postgres) {
      auto it = database_of.find(s->name);
      const std::string db = it == database_of.end() ? kDevDatabase : it->second;
      const std::string url = postgres_url(*s, db);
      env["KILN_SERVICE_" + upper + "_URL"] = url;
      env[upper + "_DATABASE_URL"] = url;
      if (!have_pg) {
        have_pg = true;
        env["DATABASE_URL"] = url;
        env["PGHOST"] = "127.0.0.1";
        env["PGPORT"] = std::to_string(s->port);
        env["PGUSER"] = "postgres";
        env["PGDATABASE"] = db;
      }
    } else if (s->kind == ServiceKind::redis) {
      const std::string url = fmt::format("redis://127.0.0.1:{}", s->port);
      env["KILN_SERVICE_" + upper + "_URL"] = url;
      if (!have_redis) {
        have_redis = true;
        env["REDIS_URL"] = url;
      }
    } else {
      env["KILN_SERVICE_" + upper + "_URL"] = fmt::format("http://127.0.0.1:{}", s->port);
    }
  }
  return env;
}

}  // namespace kiln::services
