// One MCP session as the Streamable HTTP transport holds it: the transport-independent Session
// plus its SSE streams, and the routing of everything the session sends: a response to the
// stream of the POST that asked, progress to the stream of the request owning the token, every
// other server message (logs, resource updates, roots/list) to the standalone GET stream.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "mcp/http/stream.h"
#include "mcp/session.h"

namespace kiln::server::mcp_http {

class HttpSession : public std::enable_shared_from_this<HttpSession> {
 public:
  // `principal`: whom the session acts for (its token's name); only that principal may use it.
  HttpSession(std::string id, std::string principal, EventStream::Limits limits);
  // A modern (2026-07-28) request's session: it serves that one request, and everything the
  // Session says goes to the request's stream (there is no GET stream to send anything else to).
  static std::shared_ptr<HttpSession> for_modern_request(std::string principal, EventStream::Limits limits);
  bool modern() const { return modern_; }
  // A modern request that is a subscriptions/listen (held open; counted against its own cap).
  void mark_listen() { listen_ = true; }
  bool is_listen() const { return listen_; }
  // The modern request's stream has ended or its connection went away.
  bool modern_done();
  // Starts the Session; its messages route through this object (weakly held).
  void start(ServerContext& server);

  const std::string& id() const { return id_; }
  const std::string& principal() const { return principal_; }
  // The first characters of the id, enough to tell sessions apart in a log, too few to use.
  std::string log_name() const { return id_.substr(0, 8); }
  // The Session, or nullptr once the HTTP session was closed and its Session handed off.
  std::shared_ptr<Session> session();
  std::shared_ptr<Session> release_session();

  // initialize: its response is captured instead of streamed (it is answered as application/json).
  void expect_initialize_reply(const nlohmann::json& id);
  std::optional<std::string> take_initialize_reply();
  void set_protocol_version(std::string v);
  std::string protocol_version();

  // A POST request: a new stream that its response (and its progress) will go to. nullptr when a
  // request with the same id is still in flight (ids must not be reused while pending).
  std::shared_ptr<EventStream> open_request_stream(const nlohmann::json& id, const nlohmann::json& params);
  std::shared_ptr<EventStream> standalone() { return standalone_; }
  // The stream a Last-Event-ID belongs to (nullptr if unknown or already pruned).
  std::shared_ptr<EventStream> stream(std::uint64_t number);

  // Connection side, all under the session's lock.
  void attach(const std::shared_ptr<EventStream>& s, std::shared_ptr<http::BodyStream> body,
              std::optional<std::uint64_t> after);
  void detach(const std::shared_ptr<EventStream>& s, const http::BodyStream* body);
  bool standalone_attached();

  void touch();
  // Idle: nothing attached and no request seen for `idle`.
  bool idle_for(std::chrono::steady_clock::duration idle);
  // Drops finished POST streams older than `keep` (their replay window), and beyond `max_finished`.
  void prune(std::chrono::steady_clock::duration keep, std::size_t max_finished);
  void keepalive();
  // No more messages in or out; attached connections are ended.
  void close();
  bool closed();

  // Outbound: where one message of the Session goes.
  void deliver(const nlohmann::json& message);
  // After the Session took a client's cancellation of request `id`: if no response went out, none
  // ever will (the Session drops it), so the request's stream ends now instead of staying open.
  void end_cancelled(const nlohmann::json& id);

 private:
  std::string id_;
  std::string principal_;
  bool modern_ = false;
  bool listen_ = false;
  EventStream::Limits limits_;
  std::shared_ptr<Session> session_;

  std::mutex mu_;
  bool closed_ = false;
  std::string protocol_version_;
  std::optional<std::string> init_key_;
  std::optional<std::string> init_reply_;
  std::uint64_t next_stream_ = 1;
  std::shared_ptr<EventStream> standalone_;
  std::map<std::uint64_t, std::shared_ptr<EventStream>> streams_;       // by number, for resumption
  std::map<std::string, std::shared_ptr<EventStream>> pending_;         // request id (JSON text) -> stream
  std::map<std::string, std::string> progress_owner_;                   // progressToken (JSON text) -> request id
  std::chrono::steady_clock::time_point last_seen_;
};

}  // namespace kiln::server::mcp_http
