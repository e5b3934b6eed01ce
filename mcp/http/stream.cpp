// Event numbering, replay and the one-connection-at-a-time rule of an MCP SSE stream.
#include "mcp/http/stream.h"

#include <charconv>

#include <fmt/format.h>

namespace kiln::server::mcp_http {

std::string event_id(std::uint64_t stream, std::uint64_t seq) { return fmt::format("{}-{}", stream, seq); }

std::optional<std::pair<std::uint64_t, std::uint64_t>> parse_event_id(std::string_view id) {
  auto dash = id.find('-');
  if (dash == std::string_view::npos || dash == 0 || dash + 1 == id.size() || id.size() > 41) return std::nullopt;
  std::uint64_t stream = 0, seq = 0;
  auto a = std::from_chars(id.data(), id.data() + dash, stream);
  auto b = std::from_chars(id.data() + dash + 1, id.data() + id.size(), seq);
  if (a.ec != std::errc() || a.ptr != id.data() + dash || b.ec != std::errc() || b.ptr != id.data() + id.size()) {
    return std::nullopt;
  }
  return std::pair{stream, seq};
}

bool EventStream::send(std::uint64_t seq, const std::string& data) {
  if (!body_) return false;
  std::string event = limits_.resumable ? fmt::format("id: {}\ndata: {}\n\n", event_id(number_, seq), data)
                                        : fmt::format("data: {}\n\n", data);
  if (!body_->write(event)) {
    body_.reset();  // the connection is gone; the event stays for a replay
    return false;
  }
  if (seq > given_upto_) given_upto_ = seq;
  return true;
}

void EventStream::push(std::string json_text) {
  if (finished_) return;  // nothing follows a response
  std::uint64_t seq = next_seq_++;
  bytes_ += json_text.size();
  events_.push_back(Event{seq, std::move(json_text)});
  if (send(seq, events_.back().data) && !limits_.resumable) {
    bytes_ -= events_.back().data.size();
    events_.pop_back();  // written, and never replayed
  }
  trim();
}

// Drops the oldest events beyond the limits, but never the newest one: on a POST stream that is
// the response, the one message a resuming client must not lose.
void EventStream::trim() {
  while (events_.size() > 1 && (events_.size() > limits_.max_events || bytes_ > limits_.max_bytes)) {
    bytes_ -= events_.front().data.size();
    events_.pop_front();
  }
}

void EventStream::finish() {
  if (finished_) return;
  finished_ = true;
  finished_at_ = std::chrono::steady_clock::now();
  if (body_) {
    body_->end();
    body_.reset();
  }
}

void EventStream::attach(std::shared_ptr<http::BodyStream> body, std::optional<std::uint64_t> after) {
  if (body_ && body_ != body) body_->end();
  body_ = std::move(body);
  std::uint64_t from = after.value_or(given_upto_);
  // The priming event carries the position the client resumes from if this connection drops
  // before anything else arrives.
  if (limits_.resumable &&
      !body_->write(fmt::format("id: {}\nretry: {}\ndata: \n\n", event_id(number_, from), limits_.retry.count()))) {
    body_.reset();
    return;
  }
  for (const auto& e : events_) {
    if (e.seq > from && !send(e.seq, e.data)) return;
  }
  if (finished_ && body_) {
    body_->end();
    body_.reset();
  }
}

void EventStream::detach(const http::BodyStream* body) {
  if (body_.get() == body) body_.reset();
}

void EventStream::cut() {
  if (!body_) return;
  body_->end();
  body_.reset();
}

void EventStream::keepalive() {
  if (body_ && !body_->write(": keepalive\n\n")) body_.reset();
}

}  // namespace kiln::server::mcp_http
