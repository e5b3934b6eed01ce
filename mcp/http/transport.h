// `kiln serve --mcp`: MCP's Streamable HTTP transport (2025-11-25) at /mcp. POST carries client
// messages (a request is answered with an SSE stream, initialize with JSON), GET opens the
// session's stream for server-initiated messages, DELETE ends a session; streams resume with
// Last-Event-ID. Sessions are the same Session class `kiln mcp` drives over stdio: this file only
// decides who may talk and where each message goes.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>

#include "http/message.h"
#include "mcp/http/rules.h"
#include "mcp/session.h"

namespace kiln::server::mcp_http {

// (The largest message is the HTTP server's body limit for /mcp, set where the endpoint is mounted.)
struct Options {
  std::chrono::seconds session_idle{1800};  // no request and no open stream for this long: ended
  std::size_t max_sessions = 256;
  std::chrono::seconds keepalive{15};         // SSE comment on every open stream
  std::chrono::seconds resume_window{300};    // a finished POST stream stays resumable this long
  std::size_t max_finished_streams = 64;      // per session, beyond that the oldest go
  std::chrono::milliseconds retry{1000};      // reconnection hint sent to SSE clients
};

class Endpoint {
 public:
  // Every request needs "Authorization: Bearer <token>" with one of `tokens`, and acts for that
  // token's principal; a session belongs to the principal that initialized it.
  Endpoint(ServerContext& server, Options options, TokenSet tokens);
  ~Endpoint();  // ends every session (see shutdown)
  Endpoint(const Endpoint&) = delete;
  Endpoint& operator=(const Endpoint&) = delete;

  // Where the listener ended up, for the Host and Origin rules (set before serving).
  void set_listener(unsigned short port, bool loopback);

  // One request to /mcp. Thread-safe; answers promptly (tool calls run on the session's workers).
  http::Response handle(http::Request request);

  // The refusal `handle` would give whatever the body says (Host, Origin, token, method, Accept
  // and Content-Type of a POST), from the head alone; nullopt when only the body can decide.
  // Quick (a hash and some comparisons), so the connection asks it on its io thread.
  std::optional<http::Response> screen(const http::Request& head);

  // The server is about to stop: every open subscriptions/listen gets its graceful answer while
  // its connection is still there (http::ServerOptions::on_stopping).
  void end_listeners();

  // Ends every session: streams cut, requests cancelled; waits up to `grace` for their handlers.
  void shutdown(std::chrono::milliseconds grace);

  std::size_t session_count() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::server::mcp_http
