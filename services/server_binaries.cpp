// Finding the host's database servers; the error text is what a user needs to fix a missing one.
#include "services/server_binaries.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include <fmt/format.h>

namespace kiln::services {

namespace {

bool executable(const std::filesystem::path& p) { return ::access(p.c_str(), X_OK) == 0; }

// Only what the sandbox can see: its read-only system folders are /usr, /bin, /lib and the like.
bool visible_in_sandbox(const std::string& p) {
  return p.starts_with("/usr/") || p.starts_with("/bin/") || p.starts_with("/opt/");
}

}  // namespace

Result<PostgresBinaries> find_postgres() {
  namespace fs = std::filesystem;
  const char* over = std::getenv("KILN_POSTGRES_BINDIR");
  auto check = [](const fs::path& dir) {
    return executable(dir / "postgres") && executable(dir / "initdb") && executable(dir / "pg_isready") &&
           executable(dir / "psql");
  };
  if (over && *over) {
    if (!check(over))
      return fail(Errc::unsupported,
                  fmt::format("KILN_POSTGRES_BINDIR={} has no postgres, initdb, pg_isready and psql; point it at "
                              "PostgreSQL's bin folder or unset it (Debian: apt-get install postgresql)",
                              over));
    if (!visible_in_sandbox(over))
      return fail(Errc::unsupported, fmt::format("KILN_POSTGRES_BINDIR={} is not below /usr or /opt, so the sandbox "
                                                 "cannot run it",
                                                 over));
    return PostgresBinaries{over, fs::path(over).parent_path().filename().string()};
  }
  // The newest major version Debian installed.
  PostgresBinaries best;
  int best_major = -1;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/usr/lib/postgresql", ec)) {
    const std::string v = e.path().filename().string();
    int major = std::atoi(v.c_str());
    if (major <= 0 || !check(e.path() / "bin")) continue;
    if (major > best_major) {
      best_major = major;
      best = {(e.path() / "bin").string(), v};
    }
  }
  if (best_major < 0)
    return fail(Errc::unsupported,
                "PostgreSQL's server is not installed on this host (no /usr/lib/postgresql/<version>/bin/postgres): "
                "install the Debian package postgresql (apt-get install postgresql), or set KILN_POSTGRES_BINDIR");
  return best;
}

Result<std::string> find_redis_server() {
  const char* over = std::getenv("KILN_REDIS_SERVER");
  if (over && *over) {
    if (!executable(over) || !visible_in_sandbox(over))
      return fail(Errc::unsupported,
                  fmt::format("KILN_REDIS_SERVER={} is not an executable below /usr or /opt; point it at "
                              "redis-server or unset it (Debian: apt-get install redis-server)",
                              over));
    return std::string(over);
  }
  for (const char* p : {"/usr/bin/redis-server", "/usr/local/bin/redis-server", "/usr/sbin/redis-server"})
    if (executable(p)) return std::string(p);
  return fail(Errc::unsupported,
              "redis-server is not installed on this host: install the Debian package redis-server (apt-get install "
              "redis-server), or set KILN_REDIS_SERVER");
}

}  // namespace kiln::services
