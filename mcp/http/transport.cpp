// The /mcp endpoint: who may talk (Host, Origin, bearer token), what a request must carry
// (Accept, Content-Type, Mcp-Session-Id, MCP-Protocol-Version), and the session table with its
// expiry. Message routing lives in http_session.cpp, SSE bookkeeping in stream.cpp.
#include "mcp/http/transport.h"

#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>
#include <variant>
#include <vector>

#include <fmt/format.h>
#include <sodium.h>
#include <spdlog/spdlog.h>

#include "core/random_hex.h"
#include "core/quote.h"
#include "protocol/errors.h"
#include "protocol/jsonrpc.h"
#include "protocol/mcp_era.h"
#include "protocol/mcp_params.h"
#include "mcp/http/http_session.h"

namespace kiln::server::mcp_http {

using nlohmann::json;
using http::Request;
using http::Response;

namespace {

Response json_response(int status, std::string body) {
  Response r;
  r.status = status;
  r.body = std::move(body);
  r.headers.emplace_back("Content-Type", "application/json");
  r.headers.emplace_back("Cache-Control", "no-store");
  return r;
}

// A refusal at the HTTP level still carries a JSON-RPC error, so clients can show its words. The
// transport says such an error "has no id": it answers the HTTP request, not a JSON-RPC one.
std::string error_body(json error) {
  if (error.contains("id") && error["id"].is_null()) error.erase("id");
  return protocol::serialize(error);
}

Response refuse(int status, std::string_view message, int code = protocol::kInvalidRequest) {
  return json_response(status, error_body(protocol::make_error(nullptr, code, message)));
}

// A refusal of one modern request, answered at the HTTP level but carrying the request's id.
Response refuse_request(int status, const json& id, int code, std::string_view message, json data = nullptr) {
  return json_response(status, protocol::serialize(protocol::make_error(
                                   id, code, message, data.is_null() ? std::nullopt : std::optional<json>(data))));
}

json all_versions() {
  json v = json::array();
  for (auto s : protocol::all_protocol_versions()) v.push_back(std::string(s));
  return v;
}

bool modern_header(const Request& req) {
  const std::string* v = req.header("mcp-protocol-version");
  return v && protocol::is_modern_version(*v);
}

std::string new_session_id() { return random_hex(32); }

}  // namespace

struct Endpoint::Impl {
  Impl(ServerContext& s, Options o, TokenSet t) : server(s), options(o), tokens(std::move(t)) {
    if (sodium_init() < 0) spdlog::critical("mcp: libsodium could not be initialised");
    limits.retry = options.retry;
    janitor = std::thread([this] { janitor_loop(); });
  }

  ServerContext& server;
  Options options;
  TokenSet tokens;
  EventStream::Limits limits;
  unsigned short port = 0;
  bool loopback = true;

  mutable std::mutex mu;
  std::map<std::string, std::shared_ptr<HttpSession>> sessions;
  // Modern requests in progress, each in a session of its own; ended ones are retired by the janitor.
  std::vector<std::shared_ptr<HttpSession>> modern_calls;
  // Below the HTTP server's 1024 connections, so modern requests never take every connection;
  // per principal, so one token's requests (or held-open listens) never lock the others out.
  static constexpr std::size_t kMaxModernCalls = 768;
  static constexpr std::size_t kMaxModernCallsPerPrincipal = 256;
  static constexpr std::size_t kMaxListensPerPrincipal = 64;
  bool stopping = false;
  std::condition_variable wake;
  std::thread janitor;

  // ---- who may talk ----------------------------------------------------------------------------
  // The caller's principal (the name of its token), or the refusal to send.
  std::variant<std::string, Response> check_caller(const Request& req) const {
    if (req.host.empty()) return refuse(400, "Bad Request: the Host header is missing");
    if (loopback && !is_loopback_host(req.host, port)) {
      // What a DNS-rebinding page looks like: a foreign name resolving to our loopback address.
      return refuse(403, fmt::format("Forbidden: Host '{}' does not name this loopback server (use 127.0.0.1:{}, "
                                     "localhost:{} or [::1]:{})", req.host, port, port, port));
    }
    if (const std::string* origin = req.header("origin")) {  // an empty Origin is still an Origin
      bool ok = loopback ? is_loopback_origin(*origin) : origin_matches_host(*origin, req.host);
      if (!ok) {
        return refuse(403, fmt::format("Forbidden: requests from origin '{}' are not accepted{}", *origin,
                                       loopback ? " (only pages served from this machine's loopback may call it)"
                                                : " (only the server's own origin may call it)"));
      }
    }
    std::optional<std::string> principal = tokens.principal_for(req.authorization);
    if (!principal) {
      Response r = refuse(401, "Unauthorized: send 'Authorization: Bearer <token>' with a token from the server's "
                               "--token-file, or the one `kiln serve --print-token` prints");
      r.headers.emplace_back("WWW-Authenticate", req.authorization.empty()
                                                     ? "Bearer realm=\"kiln\""
                                                     : "Bearer realm=\"kiln\", error=\"invalid_token\"");
      return r;
    }
    return *principal;
  }

  // ---- sessions ------------------------------------------------------------------------------
  // Another principal's session id gets the answer an unknown one gets: ids are never shared.
  std::variant<std::shared_ptr<HttpSession>, Response> find_session(const Request& req, const std::string& principal) {
    if (req.header_value("mcp-session-id").empty()) {
      return refuse(400, "Bad Request: the Mcp-Session-Id header is required (send initialize first to get one)");
    }
    std::shared_ptr<HttpSession> hs;
    {
      std::lock_guard lock(mu);
      auto it = sessions.find(req.header_value("mcp-session-id"));
      if (it != sessions.end()) hs = it->second;
    }
    if (!hs || hs->closed() || hs->principal() != principal) {
      return refuse(404, "Not Found: no such session (it ended or expired); send initialize to start a new one");
    }
    if (const std::string* version = req.header("mcp-protocol-version")) {  // an empty one is unsupported
      if (!is_supported_protocol_version(*version)) return unsupported_version(req);
    } else if (version_requires_header(hs->protocol_version())) {
      return refuse(400, fmt::format("Bad Request: the MCP-Protocol-Version header is required (this session uses {})",
                                     hs->protocol_version()));
    }
    hs->touch();
    return hs;
  }

  static Response unsupported_version(const Request& req) {
    return refuse(400, fmt::format("Bad Request: unsupported MCP-Protocol-Version '{}' (supported: {})",
                                   req.header_value("mcp-protocol-version"), supported_protocol_versions_text()));
  }

  // Ends a session for good: nothing reaches its streams any more, and its requests are cancelled
  // on a thread of its own (a handler may take a moment to notice; no request waits for that).
  struct Retiring {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  std::mutex retiring_mu;
  std::vector<Retiring> retiring;

  void retire(const std::shared_ptr<HttpSession>& hs) {
    hs->close();
    auto session = hs->release_session();
    if (!session) return;
    auto done = std::make_shared<std::atomic<bool>>(false);
    std::thread t([session = std::move(session), done]() mutable {
      session->shutdown(std::chrono::milliseconds(0), std::chrono::milliseconds(2000));
      session.reset();  // joins the session's workers
      *done = true;
    });
    std::lock_guard lock(retiring_mu);
    retiring.push_back(Retiring{std::move(t), std::move(done)});
  }

  // Joins the retirements that finished; with a deadline, waits for the others until then and
  // leaves whatever is still stuck in a handler that ignores cancellation to the process exit.
  void reap(std::optional<std::chrono::steady_clock::time_point> deadline = std::nullopt) {
    std::lock_guard lock(retiring_mu);
    for (auto it = retiring.begin(); it != retiring.end();) {
      while (deadline && !*it->done && std::chrono::steady_clock::now() < *deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      if (*it->done) {
        it->thread.join();
        it = retiring.erase(it);
      } else if (deadline) {
        spdlog::warn("mcp: a session's request did not stop in time; leaving it behind");
        it->thread.detach();
        it = retiring.erase(it);
      } else {
        ++it;
      }
    }
  }

  Response sse(const std::shared_ptr<HttpSession>& hs, const std::shared_ptr<EventStream>& s,
               std::optional<std::uint64_t> after) {
    Response r;
    r.status = 200;
    r.headers.emplace_back("Content-Type", "text/event-stream");
    r.headers.emplace_back("Cache-Control", "no-cache, no-transform");
    r.headers.emplace_back("X-Accel-Buffering", "no");
    auto which = std::make_shared<const http::BodyStream*>(nullptr);
    std::weak_ptr<HttpSession> weak = hs;
    r.stream_start = [weak, s, after, which](std::shared_ptr<http::BodyStream> body) {
      *which = body.get();
      if (auto h = weak.lock()) {
        h->attach(s, std::move(body), after);
      } else {
        body->end();
      }
    };
    r.stream_closed = [weak, s, which] {
      if (auto h = weak.lock()) h->detach(s, *which);
    };
    return r;
  }

  // ---- methods -------------------------------------------------------------------------------
  Response post(Request& req, const std::string& principal) {
    if (!accepts(req.accept, "application/json") || !accepts(req.accept, "text/event-stream")) {
      return refuse(406, "Not Acceptable: POST needs 'Accept: application/json, text/event-stream'");
    }
    if (!is_json_content_type(req.content_type)) {
      return refuse(415, "Unsupported Media Type: POST one JSON-RPC message as 'Content-Type: application/json'");
    }
    protocol::Message msg = protocol::classify(req.body);
    if (auto* bad = std::get_if<protocol::Invalid>(&msg)) return json_response(400, error_body(bad->reply));
    if (auto* r = std::get_if<protocol::Request>(&msg)) {
      if (r->method == "initialize") {
        if (modern_header(req)) {
          return refuse_request(400, r->id, protocol::kHeaderMismatch,
                                "Header mismatch: initialize belongs to the legacy revisions (2025-11-25 and "
                                "earlier), but MCP-Protocol-Version says 2026-07-28; send modern requests without "
                                "initialize, or initialize with a legacy version");
        }
        return initialize(req, msg, principal);
      }
      bool legacy_session = !req.header_value("mcp-session-id").empty() && !modern_header(req) &&
                            !protocol::carries_modern_meta(r->params);
      if (!legacy_session && (protocol::carries_modern_meta(r->params) || modern_header(req) ||
                              r->method == "server/discover")) {
        return modern_request(req, std::move(msg), principal);
      }
    } else if (auto* n = std::get_if<protocol::Notification>(&msg);
               n && req.header_value("mcp-session-id").empty() &&
               (protocol::carries_modern_meta(n->params) || modern_header(req))) {
      // No session to give it to: in 2026-07-28 a request is cancelled by closing its stream.
      Response accepted;
      accepted.status = 202;
      return accepted;
    }

    auto found = find_session(req, principal);
    if (auto* refusal = std::get_if<Response>(&found)) return std::move(*refusal);
    auto hs = std::get<std::shared_ptr<HttpSession>>(found);
    auto session = hs->session();
    if (!session) return refuse(404, "Not Found: the session ended; send initialize to start a new one");

    if (auto* r = std::get_if<protocol::Request>(&msg)) {
      auto stream = hs->open_request_stream(r->id, r->params);
      if (!stream) {
        return json_response(400, protocol::serialize(protocol::make_error(
                                      r->id, protocol::kInvalidRequest,
                                      "Invalid Request: id " + r->id.dump() + " is already in use by a request in progress")));
      }
      session->handle_message(std::move(msg));
      return sse(hs, stream, std::nullopt);
    }
    std::optional<json> cancelled;
    if (auto* n = std::get_if<protocol::Notification>(&msg); n && n->method == "notifications/cancelled") {
      if (auto p = protocol::decode_cancelled(n->params)) cancelled = p->request_id;
    }
    session->handle_message(std::move(msg));  // a notification or a reply to one of our requests
    // The Session has marked the request cancelled (or it was already answered): a response that
    // has not gone out never will, and its POST stream must not wait for it forever.
    if (cancelled) hs->end_cancelled(*cancelled);
    Response accepted;
    accepted.status = 202;
    return accepted;
  }

  // A request of the 2026-07-28 revision (or server/discover without a session): the headers must
  // mirror the body, and it runs in a session of its own that ends with it.
  Response modern_request(const Request& req, protocol::Message msg, const std::string& principal) {
    const auto& r = std::get<protocol::Request>(msg);
    const bool probe = r.method == "server/discover" && !protocol::carries_modern_meta(r.params);
    if (!probe) {
      auto meta = protocol::decode_request_meta(r.params);
      if (!meta) return refuse_request(400, r.id, protocol::kInvalidParams, meta.error().message);
      if (!protocol::is_modern_version(meta->protocol_version) && r.method != "server/discover") {
        return refuse_request(400, r.id, protocol::kUnsupportedProtocolVersion,
                              "Unsupported protocol version: " + meta->protocol_version +
                                  " (2026-07-28 is served per request; legacy revisions through initialize)",
                              json{{"supported", all_versions()}, {"requested", meta->protocol_version}});
      }
      const std::string* version = req.header("mcp-protocol-version");
      if (!version) {
        return refuse_request(400, r.id, protocol::kHeaderMismatch,
                              "Header mismatch: the MCP-Protocol-Version header is required and must equal "
                              "params._meta[\"io.modelcontextprotocol/protocolVersion\"]");
      }
      if (*version != meta->protocol_version) {
        return refuse_request(400, r.id, protocol::kHeaderMismatch,
                              fmt::format("Header mismatch: MCP-Protocol-Version header '{}' does not match the body's "
                                          "protocol version '{}'", *version, meta->protocol_version));
      }
      const std::string* method = req.header("mcp-method");
      if (!method || *method != r.method) {
        return refuse_request(400, r.id, protocol::kHeaderMismatch,
                              method ? fmt::format("Header mismatch: Mcp-Method header '{}' does not match the body's "
                                                   "method '{}'", *method, r.method)
                                     : fmt::format("Header mismatch: the Mcp-Method header is required ('{}')", r.method));
      }
      if (const char* field = mcp_name_field(r.method)) {
        std::string body_value;
        if (r.params.is_object() && r.params.contains(field) && r.params[field].is_string()) {
          body_value = r.params[field].get<std::string>();
        }
        const std::string* name = req.header("mcp-name");
        if (!name) {
          return refuse_request(400, r.id, protocol::kHeaderMismatch,
                                fmt::format("Header mismatch: the Mcp-Name header is required for {} (params.{})",
                                            r.method, field));
        }
        auto decoded = decode_mcp_header_value(*name);
        if (!decoded) {
          return refuse_request(400, r.id, protocol::kHeaderMismatch,
                                "Header mismatch: the Mcp-Name header has characters a header cannot carry (use the "
                                "=?base64?...?= form)");
        }
        if (*decoded != body_value) {
          return refuse_request(400, r.id, protocol::kHeaderMismatch,
                                fmt::format("Header mismatch: Mcp-Name header value '{}' does not match params.{} '{}'",
                                            bounded(*decoded), field, bounded(body_value)));
        }
      }
      if (!serves_method(r.method, true)) {
        return refuse_request(404, r.id, protocol::kMethodNotFound,
                              serves_method(r.method, false)
                                  ? fmt::format("Method not found: {} is not part of MCP 2026-07-28", r.method)
                                  : fmt::format("Method not found: {}", r.method));
      }
    }
    auto hs = HttpSession::for_modern_request(principal, limits);
    const bool listen = r.method == "subscriptions/listen";
    if (listen) hs->mark_listen();
    {
      std::lock_guard lock(mu);
      if (stopping || modern_calls.size() >= kMaxModernCalls) {
        Response busy = refuse(503, fmt::format("Service Unavailable: {} MCP requests are in progress; retry shortly",
                                                modern_calls.size()));
        busy.headers.emplace_back("Retry-After", "2");
        return busy;
      }
      std::size_t mine = 0, my_listens = 0;
      for (const auto& c : modern_calls) {
        if (c->principal() != principal) continue;
        ++mine;
        my_listens += c->is_listen();
      }
      if (mine >= kMaxModernCallsPerPrincipal || (listen && my_listens >= kMaxListensPerPrincipal)) {
        Response busy = refuse_request(
            429, r.id, protocol::kInternalError,
            listen ? fmt::format("Too Many Requests: {} subscriptions/listen streams of yours are open (at most {}); "
                                 "close one, or listen to several URIs in one",
                                 my_listens, kMaxListensPerPrincipal)
                   : fmt::format("Too Many Requests: {} requests of yours are in progress (at most {}); wait for some",
                                 mine, kMaxModernCallsPerPrincipal));
        busy.headers.emplace_back("Retry-After", "2");
        return busy;
      }
      modern_calls.push_back(hs);
    }
    hs->start(server);
    auto stream = hs->open_request_stream(r.id, r.params);
    json id = r.id;
    hs->session()->handle_message(std::move(msg));
    Response out = sse(hs, stream, std::nullopt);
    // Closing the response stream cancels the request (2026-07-28 Streamable HTTP, Cancellation).
    auto closed = std::move(out.stream_closed);
    std::weak_ptr<HttpSession> weak = hs;
    out.stream_closed = [closed = std::move(closed), weak, stream, id] {
      if (closed) closed();
      auto h = weak.lock();
      if (!h || stream->finished()) return;
      if (auto session = h->session()) session->cancel_request(id);
      h->end_cancelled(id);
    };
    return out;
  }

  Response initialize(const Request& req, protocol::Message& msg, const std::string& principal) {
    if (!req.header_value("mcp-session-id").empty()) {
      return refuse(400, "Bad Request: initialize starts a new session; send it without Mcp-Session-Id");
    }
    if (const std::string* version = req.header("mcp-protocol-version"); version && !is_supported_protocol_version(*version)) {
      return unsupported_version(req);
    }
    const json id = std::get<protocol::Request>(msg).id;
    auto hs = std::make_shared<HttpSession>(new_session_id(), principal, limits);
    hs->start(server);
    hs->expect_initialize_reply(id);
    hs->session()->handle_message(std::move(msg));  // answered inline: lifecycle methods never queue
    auto reply = hs->take_initialize_reply();
    if (!reply) {
      retire(hs);
      return refuse(500, "Internal error: initialize was not answered", protocol::kInternalError);
    }
    json parsed = json::parse(*reply, nullptr, false);
    if (!parsed.is_object() || !parsed.contains("result")) {
      retire(hs);
      return json_response(200, std::move(*reply));  // a JSON-RPC error: no session was made
    }
    hs->set_protocol_version(parsed["result"].value("protocolVersion", ""));
    {
      std::lock_guard lock(mu);
      if (stopping || sessions.size() >= options.max_sessions) {
        retire(hs);
        Response r = refuse(503, fmt::format("Service Unavailable: {} MCP sessions are open; end one (DELETE) or "
                                             "wait for idle ones to expire", sessions.size()));
        r.headers.emplace_back("Retry-After", "5");
        return r;
      }
      sessions.emplace(hs->id(), hs);
    }
    spdlog::info("mcp: session {} of {} started ({} open)", hs->log_name(), principal, session_count());
    Response r = json_response(200, std::move(*reply));
    r.headers.emplace_back("Mcp-Session-Id", hs->id());
    return r;
  }

  Response get(const Request& req, const std::string& principal) {
    if (!accepts(req.accept, "text/event-stream")) {
      return refuse(406, "Not Acceptable: GET opens an SSE stream; send 'Accept: text/event-stream'");
    }
    auto found = find_session(req, principal);
    if (auto* refusal = std::get_if<Response>(&found)) return std::move(*refusal);
    auto hs = std::get<std::shared_ptr<HttpSession>>(found);
    if (!req.header_value("last-event-id").empty()) {
      auto pos = parse_event_id(req.header_value("last-event-id"));
      auto stream = pos ? hs->stream(pos->first) : nullptr;
      if (!stream || !stream->knows(pos->second)) {
        return refuse(400, fmt::format("Bad Request: Last-Event-ID '{}' names no event of this session that can still "
                                       "be resumed", req.header_value("last-event-id")));
      }
      return sse(hs, stream, pos->second);
    }
    if (hs->standalone_attached()) {
      return refuse(409, "Conflict: this session already has its GET stream open (one per session; to resume after "
                         "a drop, send Last-Event-ID)");
    }
    return sse(hs, hs->standalone(), std::nullopt);
  }

  Response del(const Request& req, const std::string& principal) {
    auto found = find_session(req, principal);
    if (auto* refusal = std::get_if<Response>(&found)) return std::move(*refusal);
    auto hs = std::get<std::shared_ptr<HttpSession>>(found);
    {
      std::lock_guard lock(mu);
      sessions.erase(hs->id());
    }
    retire(hs);
    spdlog::info("mcp: session {} ended by its client", hs->log_name());
    Response r;
    r.status = 204;
    return r;
  }

  std::size_t session_count() const {
    std::lock_guard lock(mu);
    return sessions.size();
  }

  // ---- housekeeping --------------------------------------------------------------------------
  void janitor_loop() {
    auto next_keepalive = std::chrono::steady_clock::now() + options.keepalive;
    std::unique_lock lock(mu);
    while (!stopping) {
      wake.wait_for(lock, std::chrono::milliseconds(500));
      if (stopping) break;
      std::vector<std::shared_ptr<HttpSession>> all;
      for (const auto& [id, hs] : sessions) all.push_back(hs);
      lock.unlock();
      bool ping = std::chrono::steady_clock::now() >= next_keepalive;
      if (ping) next_keepalive = std::chrono::steady_clock::now() + options.keepalive;
      for (const auto& hs : all) {
        if (hs->idle_for(options.session_idle)) {
          {
            std::lock_guard relock(mu);
            sessions.erase(hs->id());
          }
          retire(hs);
          spdlog::info("mcp: session {} expired after {} s without requests", hs->log_name(), options.session_idle.count());
          continue;
        }
        hs->prune(options.resume_window, options.max_finished_streams);
        if (ping) hs->keepalive();
      }
      std::vector<std::shared_ptr<HttpSession>> ended;
      {
        std::lock_guard relock(mu);
        for (auto it = modern_calls.begin(); it != modern_calls.end();) {
          if ((*it)->modern_done() || (*it)->idle_for(std::chrono::seconds(60))) {
            ended.push_back(*it);
            it = modern_calls.erase(it);
          } else {
            if (ping) (*it)->keepalive();
            ++it;
          }
        }
      }
      for (const auto& hs : ended) retire(hs);
      reap();
      lock.lock();
    }
  }

  void shutdown(std::chrono::milliseconds grace) {
    std::vector<std::shared_ptr<HttpSession>> all;
    {
      std::lock_guard lock(mu);
      stopping = true;
      for (const auto& [id, hs] : sessions) all.push_back(hs);
      sessions.clear();
      for (const auto& hs : modern_calls) all.push_back(hs);
      modern_calls.clear();
    }
    wake.notify_all();
    if (janitor.joinable()) janitor.join();
    for (const auto& hs : all) {
      // A modern listener's graceful answer goes out before its stream is cut.
      if (auto session = hs->modern() ? hs->session() : nullptr) session->shutdown(std::chrono::milliseconds(0), std::chrono::milliseconds(0));
      retire(hs);
    }
    reap(std::chrono::steady_clock::now() + grace);
  }
};

Endpoint::Endpoint(ServerContext& server, Options options, TokenSet tokens)
    : impl_(std::make_unique<Impl>(server, options, std::move(tokens))) {}

Endpoint::~Endpoint() { impl_->shutdown(std::chrono::milliseconds(500)); }

void Endpoint::set_listener(unsigned short port, bool loopback) {
  impl_->port = port;
  impl_->loopback = loopback;
}

Response Endpoint::handle(Request request) {
  Response r;
  auto caller = impl_->check_caller(request);
  if (auto* refusal = std::get_if<Response>(&caller)) {
    r = std::move(*refusal);
  } else if (request.method == "POST") {
    return impl_->post(request, std::get<std::string>(caller));
  } else if (request.method == "GET") {
    return impl_->get(request, std::get<std::string>(caller));
  } else if (request.method == "DELETE") {
    return impl_->del(request, std::get<std::string>(caller));
  } else {
    // OPTIONS too: no CORS, so no browser page elsewhere can make the JSON POSTs MCP needs.
    r = refuse(405, fmt::format("Method Not Allowed: /mcp takes POST, GET and DELETE, not {}", request.method));
    r.headers.emplace_back("Allow", "GET, POST, DELETE");
  }
  r.head = request.method == "HEAD";  // the headers of the answer, never a body
  return r;
}

std::optional<Response> Endpoint::screen(const Request& head) {
  auto caller = impl_->check_caller(head);
  if (auto* refusal = std::get_if<Response>(&caller)) return std::move(*refusal);
  if (head.method == "POST") {
    // The same two refusals post() starts with, in the same order.
    if (!accepts(head.accept, "application/json") || !accepts(head.accept, "text/event-stream")) {
      return refuse(406, "Not Acceptable: POST needs 'Accept: application/json, text/event-stream'");
    }
    if (!is_json_content_type(head.content_type)) {
      return refuse(415, "Unsupported Media Type: POST one JSON-RPC message as 'Content-Type: application/json'");
    }
    return std::nullopt;
  }
  if (head.method == "GET" || head.method == "DELETE") return std::nullopt;
  // Any other method: handle's 405 (with Allow) needs no body either.
  return handle(head);
}

void Endpoint::shutdown(std::chrono::milliseconds grace) { impl_->shutdown(grace); }

void Endpoint::end_listeners() {
  std::vector<std::shared_ptr<HttpSession>> calls;
  {
    std::lock_guard lock(impl_->mu);
    calls = impl_->modern_calls;
  }
  for (const auto& hs : calls) {
    if (auto session = hs->session()) session->end_listeners();
  }
}

std::size_t Endpoint::session_count() const { return impl_->session_count(); }

}  // namespace kiln::server::mcp_http
