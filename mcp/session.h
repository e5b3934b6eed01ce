// One MCP session, independent of its transport: lifecycle, dispatch of requests to handlers on a
// worker pool, exactly one reply per request, cancellation, progress, logging, and the requests
// Kiln itself sends to the client (roots/list). stdio and Streamable HTTP both drive this class.
// It serves both eras: requests after `initialize` (legacy) and requests carrying the 2026-07-28
// _meta envelope, each served statelessly (on HTTP each modern request gets a Session of its own).
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "mcp/resource_provider.h"
#include "mcp/server_shared.h"
#include "protocol/jsonrpc.h"

namespace kiln::workspace { class StateStore; }

namespace kiln::server {

class ToolRegistry;

// Where a session's outgoing messages go. Implementations must be thread-safe.
class Outbound {
 public:
  virtual ~Outbound() = default;
  virtual void send(const nlohmann::json& message) = 0;
};

struct ServerOptions {
  std::string startup_workspace;  // --workspace PATH, opened when the client offers no roots
  std::size_t worker_threads = 8;    // threads kept warm for requests
  // Requests of one session that run at once; each gets its own thread, so slow calls never
  // hold up quick ones until a client has this many in flight (then new ones wait their turn).
  std::size_t max_concurrent_requests = 64;
  bool allow_unsandboxed = false;  // --allow-unsandboxed: sandbox isolation "none" is permitted
  int sandbox_idle_s = 1800;       // --sandbox-idle-s: idle session sandboxes are destroyed after this
  // The process's own log lines (spdlog) reach clients that asked for logs. Right for stdio, where
  // the process serves one client; an HTTP server shares the process between clients, and one
  // client must not read what another one's session logged.
  bool forward_process_logs = true;
};

// What every session of one server process shares.
struct ServerContext {
  workspace::StateStore& store;
  const ToolRegistry& tools;
  ServerOptions options;
  // Resource families besides the workspace's files (kiln://trace/); they outlive every session.
  std::vector<const ResourceProvider*> resources;
  // Tasks and resource-change events, shared by every session of the process.
  std::shared_ptr<ServerShared> shared = make_server_shared();
  // Run on the request's thread before a tool starts, with the caller's principal: the runtime
  // waits there for the records of that principal's runs that have answered but whose trace end
  // is still being written (RunTracer::attach).
  std::function<void(const std::string& principal)> before_tool_call;
  // Run once the sessions have shut down, before the process leaves without destructors: waits
  // for what is still being written after its answer went out (the ends of runs' traces and the
  // checkpoints after them), so a client that closes right after a result loses none of it.
  std::function<void()> before_exit;
};

// Whether a session answers `method` for a request of that era (the HTTP transport answers an
// unknown modern method with 404 before any session sees it).
bool serves_method(std::string_view method, bool modern);

class Session {
 public:
  // `principal`: whom the session acts for (TOOLS.md, principals); empty means the local user, as
  // over stdio.
  Session(ServerContext& server, std::shared_ptr<Outbound> out, std::string principal = {});
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Feeds one complete JSON-RPC message (already de-framed). Never throws; never blocks on a
  // tool: requests run on the worker pool.
  void handle_payload(std::string_view payload);
  // The same for a message the transport already classified (Streamable HTTP must know a
  // message's kind before it answers the HTTP request that carried it).
  void handle_message(protocol::Message message);

  // Sends an error reply that the transport detected before a message could be parsed
  // (oversize, broken framing).
  void reject_unparsed(int code, const std::string& message);

  // Stops taking requests, lets those in flight run for up to `drain`, then cancels the rest and
  // waits up to `grace` more for their handlers to return. Returns whether all of them did.
  bool shutdown(std::chrono::milliseconds drain, std::chrono::milliseconds grace);

  // Answers every open subscriptions/listen (the server is ending them), leaving other requests be.
  void end_listeners();

  // Cancels request `id` as notifications/cancelled would (the HTTP transport: a modern request's
  // stream closed).
  void cancel_request(const nlohmann::json& id);

  // Sends notifications/message (if the client asked for logs at this level).
  void log_to_client(std::string_view level, std::string_view logger, std::string_view text);

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace kiln::server
