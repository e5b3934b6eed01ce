// `kiln serve` start-up: open the artifact store (and with --mcp the MCP runtime and its bearer
// tokens: --token-file's, else the state directory's own, never none), bind, announce the URL in
// <state>/serve.json (atomically, after the bind, so whoever reads it can connect at once), serve, clean up.
#include "cli/blob_owners.h"
#include "cli/serve_command.h"

#include <limits.h>
#include <malloc.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "artifacts/artifact_store.h"
#include "cli/app_runtime.h"
#include "cli/ceiling_options.h"
#include "cli/mcp_runtime.h"
#include "core/fast_exit.h"
#include "http/server.h"
#include "mcp/http/token.h"
#include "mcp/http/transport.h"
#include "mcp/logging.h"
#include "mcp/principal.h"
#include "serve/artifact_router.h"
#include "serve/daemon.h"
#include "serve/serve_cache.h"

namespace kiln::cli {
namespace {

namespace http = server::http;
namespace mcp_http = server::mcp_http;
using server::default_token_path;
using server::ensure_default_token;
using server::local_principal;
using server::read_serve_info;
using server::remove_serve_info_if_ours;
using server::ServeInfo;
using server::write_serve_info;

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string url_host(const std::string& host) {
  if (host == "0.0.0.0") return "127.0.0.1";
  if (host == "::") return "[::1]";
  return host.find(':') != std::string::npos ? "[" + host + "]" : host;
}

}  // namespace

int run_serve(const ServeOptions& options, const std::string& state_dir_in) {
  // Started by `kiln mcp`, we may inherit its blocked termination signals; a dead client's
  // socket must not kill us through sendfile's SIGPIPE.
  sigset_t term;
  sigemptyset(&term);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&term, sig);
  ::pthread_sigmask(SIG_UNBLOCK, &term, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  // A proxied request takes two 64 KiB buffers: with glibc's default thresholds the heap top was
  // trimmed and regrown (brk, madvise) around nearly every request.
  ::mallopt(M_TRIM_THRESHOLD, 64 << 20);
  ::mallopt(M_MMAP_THRESHOLD, 1 << 20);

  // main() has already made it ours and 0700 (workspace::secure_state_dir); this is its real path.
  char real[PATH_MAX];
  std::string state_dir = ::realpath(state_dir_in.c_str(), real) ? std::string(real) : state_dir_in;
  if (options.daemon) server::init_file_logging(state_dir + "/serve.log", options.log_level);

  auto store = open_artifacts(state_dir);
  if (!store) {
    spdlog::error("serve: {}", store.error().message);
    std::fprintf(stderr, "kiln: %s\n", store.error().message.c_str());
    return 1;
  }
  // Once the MCP runtime runs (its tool registry fills on a thread of its own), returning through
  // exit() would destroy statics under that thread: every later failure leaves with _Exit.
  bool runtime_open = false;
  auto refuse = [&runtime_open](const std::string& message) {
    spdlog::error("serve: {}", message);
    std::fprintf(stderr, "kiln: %s\n", message.c_str());
    if (runtime_open) {
      spdlog::default_logger()->flush();
      std::fflush(nullptr);
      kiln::fast_exit(1);
    }
    return 1;
  };
  auto no_token_message = [](const std::string& where) {
    return fmt::format(
        "refusing to serve MCP on {}: anyone who can reach it could run commands in your workspaces. Pass "
        "--token-file FILE (one bearer token per line, at least 32 characters, e.g. from 'openssl rand -hex 32'; "
        "chmod 600), or listen on 127.0.0.1 (where the token in the state directory's mcp-token is used)",
        where);
  };
  // Every /mcp request carries a credential, on every bind: the --token-file's tokens (each
  // acting for its name), else the state directory's own token, acting for the local user.
  std::optional<mcp_http::TokenSet> tokens;
  std::string token_source;
  if (!options.token_file.empty()) {
    auto loaded = mcp_http::TokenSet::load(options.token_file);
    if (!loaded) return refuse(loaded.error().message);
    if (!options.mcp) spdlog::warn("serve: --token-file only guards /mcp, which needs --mcp; it is unused");
    tokens = std::move(*loaded);
    token_source = options.token_file;
  }
  if (options.mcp && !tokens) {
    // The generated token is this user's, for this machine: a bind other machines can reach
    // must name its clients in a --token-file.
    auto where = http::parse_listen(options.listen);  // a bad --listen is reported by the bind below
    if (where && !mcp_http::is_loopback_address(where->host)) return refuse(no_token_message(options.listen));
    auto token = ensure_default_token(state_dir);
    if (!token) return refuse(token.error().message);
    auto set = mcp_http::TokenSet::single(local_principal(), *token);
    if (!set) return refuse(set.error().message);
    tokens = std::move(*set);
    token_source = default_token_path(state_dir);
  }
  std::unique_ptr<mcp_http::Endpoint> mcp;
  std::function<void()> mcp_before_exit;
  if (options.mcp) {
    auto context = open_mcp_runtime(
        {state_dir, options.workspace, options.allow_unsandboxed, options.sandbox_idle_s, options.ceilings});
    if (!context) return refuse(context.error().message);
    runtime_open = true;
    // One process, many clients: no client hears what the process logs for the others.
    (*context)->options.forward_process_logs = false;
    mcp_before_exit = (*context)->before_exit;
    mcp_http::Options mo;
    mo.session_idle = std::chrono::seconds(options.session_idle_s);
    mcp = std::make_unique<mcp_http::Endpoint>(**context, mo, std::move(*tokens));
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
  if (mcp) {
    so.on_stopping = [m = mcp.get()] { m->end_listeners(); };
    so.endpoints.push_back(http::Endpoint{"/mcp", options.max_message_bytes,
                                          [m = mcp.get()](http::Request r) { return m->handle(std::move(r)); },
                                          [m = mcp.get()](const http::Request& r) { return m->screen(r); }});
  }
  // Apps: the supervisor, its front door on /a/NAME/ of every app, and the control endpoint.
  auto apps = open_app_runtime({state_dir, store->get(), options.ceilings, options.allow_unsandboxed});
  if (!apps) return refuse(apps.error().message);
  if (auto ok = attach_apps(**apps, so, ctx); !ok) return refuse(ok.error().message);
  auto server = http::Server::bind(so, [ctx](const http::Request& r) { return http::route(r, ctx); });
  if (!server) {
    std::string hint = server.error().code == Errc::conflict ? " (pass --listen 127.0.0.1:0 for any free port)" : "";
    return refuse(server.error().message + hint);
  }
  auto& srv = **server;
  std::string bound = fmt::format("{}:{}", srv.host().find(':') != std::string::npos ? "[" + srv.host() + "]" : srv.host(),
                                  srv.port());
  if (mcp && !srv.loopback_only() && options.token_file.empty()) return refuse(no_token_message(bound));  // checked above too
  if (mcp) mcp->set_listener(srv.port(), srv.loopback_only());
  if (!srv.loopback_only()) {
    spdlog::warn("serve: listening on {}, reachable from other machines: anyone who can reach it sees public artifacts",
                 bound);
  }
  ServeInfo info{pid, fmt::format("http://{}:{}", url_host(srv.host()), srv.port()), bound, utc_now(), state_dir};
  if (auto w = write_serve_info(state_dir, info); !w) spdlog::warn("serve: {}", w.error().message);
  spdlog::info("serve: serving {} at {} (pid {}{})", state_dir, info.url, pid, options.daemon ? ", daemon" : "");
  // Where the token is, never the token: logs are read by more people than the token file.
  if (mcp) spdlog::info("serve: /mcp takes the bearer tokens in {}", token_source);
  if (!options.daemon) {
    std::string mcp_note =
        mcp ? fmt::format(", MCP at {}/mcp (bearer token in {}{})", info.url, token_source,
                          options.token_file.empty() ? "; `kiln serve --print-token` prints it" : "")
            : "";
    std::fprintf(stderr, "kiln serve: artifacts at %s/a/NAME/%s (Ctrl-C stops)\n", info.url.c_str(), mcp_note.c_str());
  }
  start_apps(**apps, info.url);
  srv.run();
  stop_apps(**apps);
  remove_serve_info_if_ours(state_dir, pid);
  if (mcp) {
    // As `kiln mcp` does at its end: requests in flight are cancelled and get a moment; handlers
    // that ignore that must not keep the process alive, and everything durable is written.
    mcp->shutdown(std::chrono::milliseconds(1500));
    if (mcp_before_exit) mcp_before_exit();
    spdlog::default_logger()->flush();
    std::fflush(nullptr);
    kiln::fast_exit(0);
  }
  spdlog::default_logger()->flush();
  return 0;
}

int print_token(const std::string& state_dir) {
  auto token = ensure_default_token(state_dir);
  if (!token) {
    std::fprintf(stderr, "kiln: %s\n", token.error().message.c_str());
    return 1;
  }
  // stdout only: `Authorization: Bearer $(kiln serve --print-token)` is how it is meant to be used.
  std::printf("%s\n", token->c_str());
  return 0;
}

CLI::App& ServeCommand::configure(CLI::App& app) {
  ServeOptions& o = options_;
  auto* serve = app.add_subcommand("serve", "Serve published artifacts over HTTP at /a/NAME/ (kiln publish starts one as needed)");
  serve->footer(
      "One server per state directory announces itself in <state>/serve.json. With --mcp, /mcp is MCP's "
      "Streamable HTTP transport and every request needs a bearer token. Exit: 0 after SIGTERM or Ctrl-C, "
      "1 if it cannot start.");
  serve->add_option("--listen", o.listen, "HOST:PORT to listen on (default 127.0.0.1:7700; port 0 picks a free one)");
  serve->add_flag("--daemon", o.daemon, "Run as the state directory's background server (log to <state>/serve.log)");
  serve->add_flag("--mcp", o.mcp, "Also serve MCP (Streamable HTTP) at /mcp, with the same sessions as kiln mcp");
  serve->add_option("--token-file", o.token_file,
                    "Bearer tokens for /mcp, lines NAME TOKEN (required beyond loopback; default: <state>/mcp-token)");
  serve->add_flag("--print-token", print_token_, "Print the /mcp bearer token of the state directory and exit");
  serve->add_option("--workspace", o.workspace, "With --mcp: folder each session opens when its client offers no roots");
  serve->add_flag("--allow-unsandboxed", o.allow_unsandboxed,
                  "With --mcp: permit sandbox isolation \"none\" (every result says so)");
  serve->add_option("--sandbox-idle-s", o.sandbox_idle_s, "With --mcp: destroy idle session sandboxes after this long")
      ->check(CLI::Range(1, 7 * 24 * 3600));
  add_ceiling_options(*serve, o.ceilings);
  serve->add_option("--session-idle-s", o.session_idle_s,
                    "With --mcp: end an MCP session after this long without requests or open streams (default 1800)")
      ->check(CLI::Range(1, 7 * 24 * 3600));
  serve->add_option("--max-message-bytes", o.max_message_bytes, "With --mcp: largest accepted message (default 16 MiB)")
      ->check(CLI::Range(std::size_t(1024), std::size_t(1) << 30));
  return *serve;
}

int ServeCommand::run(const GlobalOptions& global) {
  if (print_token_) return print_token(global.state_dir);
  options_.log_level = global.log_level;
  return run_serve(options_, global.state_dir);
}

}  // namespace kiln::cli
