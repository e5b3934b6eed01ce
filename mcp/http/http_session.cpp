// Routing and stream bookkeeping of one MCP-over-HTTP session (see http_session.h).
#include "mcp/http/http_session.h"

#include <vector>

#include <spdlog/spdlog.h>

#include "protocol/jsonrpc.h"

namespace kiln::server::mcp_http {

using nlohmann::json;

namespace {

// The Session's Outbound. Weak, so a session whose transport is gone drops what it still says.
class Router final : public Outbound {
 public:
  explicit Router(std::weak_ptr<HttpSession> s) : s_(std::move(s)) {}
  void send(const json& message) override {
    if (auto s = s_.lock()) s->deliver(message);
  }

 private:
  std::weak_ptr<HttpSession> s_;
};

std::string key_of(const json& id) { return id.dump(); }

}  // namespace

HttpSession::HttpSession(std::string id, std::string principal, EventStream::Limits limits)
    : id_(std::move(id)), principal_(std::move(principal)), limits_(limits), standalone_(std::make_shared<EventStream>(0, limits)),
      last_seen_(std::chrono::steady_clock::now()) {
  streams_[0] = standalone_;
}

std::shared_ptr<HttpSession> HttpSession::for_modern_request(std::string principal, EventStream::Limits limits) {
  limits.resumable = false;
  auto hs = std::make_shared<HttpSession>("modern", std::move(principal), limits);
  hs->modern_ = true;
  return hs;
}

bool HttpSession::modern_done() {
  std::lock_guard lock(mu_);
  if (closed_) return true;
  for (const auto& [n, s] : streams_) {
    if (n == 0) continue;
    if (s->attached()) return false;
    if (s->finished()) return true;
  }
  return false;
}

void HttpSession::start(ServerContext& server) {
  session_ = std::make_shared<Session>(server, std::make_shared<Router>(weak_from_this()), principal_);
}

std::shared_ptr<Session> HttpSession::session() {
  std::lock_guard lock(mu_);
  return session_;
}

std::shared_ptr<Session> HttpSession::release_session() {
  std::lock_guard lock(mu_);
  return std::move(session_);
}

void HttpSession::expect_initialize_reply(const json& id) {
  std::lock_guard lock(mu_);
  init_key_ = key_of(id);
}

std::optional<std::string> HttpSession::take_initialize_reply() {
  std::lock_guard lock(mu_);
  init_key_.reset();
  return std::exchange(init_reply_, std::nullopt);
}

void HttpSession::set_protocol_version(std::string v) {
  std::lock_guard lock(mu_);
  protocol_version_ = std::move(v);
}

std::string HttpSession::protocol_version() {
  std::lock_guard lock(mu_);
  return protocol_version_;
}

std::shared_ptr<EventStream> HttpSession::open_request_stream(const json& id, const json& params) {
  std::lock_guard lock(mu_);
  std::string key = key_of(id);
  if (pending_.contains(key)) return nullptr;
  auto s = std::make_shared<EventStream>(next_stream_++, limits_);
  streams_[s->number()] = s;
  pending_[key] = s;
  if (params.is_object() && params.contains("_meta") && params["_meta"].is_object() &&
      params["_meta"].contains("progressToken")) {
    progress_owner_[params["_meta"]["progressToken"].dump()] = key;
  }
  last_seen_ = std::chrono::steady_clock::now();
  return s;
}

std::shared_ptr<EventStream> HttpSession::stream(std::uint64_t number) {
  std::lock_guard lock(mu_);
  auto it = streams_.find(number);
  return it == streams_.end() ? nullptr : it->second;
}

void HttpSession::attach(const std::shared_ptr<EventStream>& s, std::shared_ptr<http::BodyStream> body,
                         std::optional<std::uint64_t> after) {
  std::lock_guard lock(mu_);
  last_seen_ = std::chrono::steady_clock::now();
  if (closed_) {
    body->end();
    return;
  }
  s->attach(std::move(body), after);
}

void HttpSession::detach(const std::shared_ptr<EventStream>& s, const http::BodyStream* body) {
  std::lock_guard lock(mu_);
  last_seen_ = std::chrono::steady_clock::now();
  s->detach(body);
}

bool HttpSession::standalone_attached() {
  std::lock_guard lock(mu_);
  return standalone_->attached();
}

void HttpSession::touch() {
  std::lock_guard lock(mu_);
  last_seen_ = std::chrono::steady_clock::now();
}

bool HttpSession::idle_for(std::chrono::steady_clock::duration idle) {
  std::lock_guard lock(mu_);
  for (const auto& [n, s] : streams_) {
    if (s->attached()) return false;
  }
  return std::chrono::steady_clock::now() - last_seen_ >= idle;
}

void HttpSession::prune(std::chrono::steady_clock::duration keep, std::size_t max_finished) {
  std::lock_guard lock(mu_);
  auto now = std::chrono::steady_clock::now();
  std::vector<std::uint64_t> finished;  // ascending by number = by age
  for (const auto& [n, s] : streams_) {
    if (n != 0 && s->finished() && !s->attached()) finished.push_back(n);
  }
  std::size_t excess = finished.size() > max_finished ? finished.size() - max_finished : 0;
  for (std::size_t i = 0; i < finished.size(); ++i) {
    auto it = streams_.find(finished[i]);
    if (i < excess || now - it->second->finished_at() >= keep) streams_.erase(it);
  }
}

void HttpSession::keepalive() {
  std::lock_guard lock(mu_);
  for (const auto& [n, s] : streams_) s->keepalive();
}

void HttpSession::close() {
  std::lock_guard lock(mu_);
  closed_ = true;
  for (const auto& [n, s] : streams_) s->cut();
}

bool HttpSession::closed() {
  std::lock_guard lock(mu_);
  return closed_;
}

void HttpSession::end_cancelled(const json& id) {
  std::string key = key_of(id);
  std::lock_guard lock(mu_);
  auto it = pending_.find(key);
  if (it == pending_.end()) return;  // answered before the cancellation arrived
  auto s = it->second;
  pending_.erase(it);
  std::erase_if(progress_owner_, [&](const auto& kv) { return kv.second == key; });
  s->finish();
}

void HttpSession::deliver(const json& message) {
  std::string text = protocol::serialize(message);
  if (text.empty()) return;
  bool is_response = message.contains("id") && !message.contains("method");
  std::lock_guard lock(mu_);
  if (closed_) return;
  if (is_response) {
    std::string key = key_of(message["id"]);
    if (init_key_ && key == *init_key_) {
      init_reply_ = std::move(text);
      return;
    }
    if (auto it = pending_.find(key); it != pending_.end()) {
      auto s = it->second;
      pending_.erase(it);
      std::erase_if(progress_owner_, [&](const auto& kv) { return kv.second == key; });
      s->push(std::move(text));
      s->finish();
      return;
    }
    // No request of ours waits for it (the transport refuses duplicate ids before the session sees
    // them, so this should not happen): a response must not go out on the GET stream.
    spdlog::warn("mcp: session {} dropped a response to unknown request {}", log_name(), key);
    return;
  } else if (message.value("method", "") == "notifications/progress" && message.contains("params") &&
             message["params"].is_object() && message["params"].contains("progressToken")) {
    auto owner = progress_owner_.find(message["params"]["progressToken"].dump());
    if (owner != progress_owner_.end()) {
      if (auto it = pending_.find(owner->second); it != pending_.end()) {
        it->second->push(std::move(text));
        return;
      }
    }
  }
  if (modern_) {
    // A modern request's log messages and listen notifications belong to its own stream.
    if (!pending_.empty()) pending_.begin()->second->push(std::move(text));
    return;
  }
  // Not tied to a request in flight: logs, resource updates, server requests (roots/list).
  standalone_->push(std::move(text));
}

}  // namespace kiln::server::mcp_http
