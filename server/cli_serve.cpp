// `kiln serve` start-up: open the artifact store, bind, announce the URL in <state>/serve.json
// (atomically, after the bind, so whoever reads it can connect at once), serve, clean up.
#include "server/cli_serve.h"

#include <limits.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>

#include <fmt/format.h>
#include <spdlog/sinks/rotating_file_sink.h>
#include <spdlog/spdlog.h>

#include "artifacts/artifact_store.h"
#include "server/http_cache.h"
#include "server/http_server.h"
#include "server/logging.h"
#include "server/serve_daemon.h"

namespace kiln::server {
namespace {

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// The daemon logs one line per request: buffer them and flush each second (and at once for
// warnings) rather than a write(2) per line, and rotate (3 x 10 MiB) so a busy server's log stays
// bounded.
void daemon_logging(const std::string& state_dir, const std::string& level) {
  try {
    auto sink = std::make_shared<spdlog::sinks::rotating_file_sink_mt>(state_dir + "/serve.log", 10 << 20, 3);
    sink->set_pattern("kiln %Y-%m-%dT%H:%M:%S.%e %l: %v");
    auto logger = std::make_shared<spdlog::logger>("kiln", sink);
    logger->set_level(level == "debug" ? spdlog::level::debug
                      : level == "warning" || level == "warn" ? spdlog::level::warn
                      : level == "error" ? spdlog::level::err
                                         : spdlog::level::info);
    logger->flush_on(spdlog::level::warn);
    spdlog::set_default_logger(logger);
    spdlog::flush_every(std::chrono::seconds(1));
  } catch (const spdlog::spdlog_ex& e) {
    spdlog::warn("serve: cannot log to {}/serve.log ({}); logging to stderr", state_dir, e.what());
  }
}

std::string url_host(const std::string& host) {
  if (host == "0.0.0.0") return "127.0.0.1";
  if (host == "::") return "[::1]";
  return host.find(':') != std::string::npos ? "[" + host + "]" : host;
}

}  // namespace

int serve_command(const ServeOptions& options, const std::string& state_dir_in) {
  // Started by `kiln mcp`, we may inherit its blocked termination signals; a dead client's
  // socket must not kill us through sendfile's SIGPIPE.
  sigset_t term;
  sigemptyset(&term);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&term, sig);
  ::pthread_sigmask(SIG_UNBLOCK, &term, nullptr);
  ::signal(SIGPIPE, SIG_IGN);

  std::error_code ec;
  std::filesystem::create_directories(state_dir_in, ec);
  ::chmod(state_dir_in.c_str(), 0700);
  char real[PATH_MAX];
  std::string state_dir = ::realpath(state_dir_in.c_str(), real) ? std::string(real) : state_dir_in;
  if (options.daemon) daemon_logging(state_dir, options.log_level);

  auto store = artifacts::ArtifactStore::open(state_dir);
  if (!store) {
    spdlog::error("serve: {}", store.error().message);
    std::fprintf(stderr, "kiln: %s\n", store.error().message.c_str());
    return 1;
  }
  if (!options.token_file.empty()) {
    // Issue 6 (/mcp over HTTP) reads bearer tokens from here; check it now so a typo shows early.
    if (::access(options.token_file.c_str(), R_OK) != 0) {
      spdlog::warn("serve: --token-file {} is not readable; it is unused until /mcp exists", options.token_file);
    }
  }

  http::ServeCache cache(state_dir, "artifacts.db");  // the store's file, per artifact_store.h
  http::RouterContext ctx;
  ctx.store = store->get();
  ctx.cache = &cache;
  ctx.state_dir = state_dir;
  ctx.pid = ::getpid();
  http::ServerOptions so;
  so.listen = options.listen;
  long pid = ::getpid();
  if (options.daemon) {
    // A daemon whose state directory is gone (a deleted test home) or that another server has
    // replaced has nothing left to serve.
    so.watchdog = [state_dir, pid] {
      struct stat st {};
      if (::stat(state_dir.c_str(), &st) != 0) return false;
      auto info = read_serve_info(state_dir);
      return !info || info->pid == pid;
    };
  }
  so.watch_fd = cache.watch_fd();
  so.on_readable = [&cache] { cache.on_events(); };
  auto server = http::Server::bind(so, ctx);
  if (!server) {
    std::string hint = server.error().code == Errc::conflict ? " (pass --listen 127.0.0.1:0 for any free port)" : "";
    spdlog::error("serve: {}{}", server.error().message, hint);
    std::fprintf(stderr, "kiln: %s%s\n", server.error().message.c_str(), hint.c_str());
    return 1;
  }
  auto& srv = **server;
  std::string bound = fmt::format("{}:{}", srv.host().find(':') != std::string::npos ? "[" + srv.host() + "]" : srv.host(),
                                  srv.port());
  if (!srv.loopback_only()) {
    spdlog::warn("serve: listening on {}, reachable from other machines: anyone who can reach it sees public artifacts",
                 bound);
  }
  ServeInfo info{pid, fmt::format("http://{}:{}", url_host(srv.host()), srv.port()), bound, utc_now(), state_dir};
  if (auto w = write_serve_info(state_dir, info); !w) spdlog::warn("serve: {}", w.error().message);
  spdlog::info("serve: serving {} at {} (pid {}{})", state_dir, info.url, pid, options.daemon ? ", daemon" : "");
  if (!options.daemon) std::fprintf(stderr, "kiln serve: artifacts at %s/a/NAME/ (Ctrl-C stops)\n", info.url.c_str());
  srv.run();
  remove_serve_info_if_ours(state_dir, pid);
  spdlog::default_logger()->flush();
  return 0;
}

}  // namespace kiln::server
