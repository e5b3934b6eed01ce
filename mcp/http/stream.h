// One Server-Sent Events stream of an MCP HTTP session: the response stream of one POST request,
// or the session's standalone stream (GET). It numbers its events, keeps them for replay after a
// dropped connection (Last-Event-ID), and writes to whichever connection is attached right now:
// a message goes to exactly one stream, never to several.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "http/message.h"

namespace kiln::server::mcp_http {

// "<stream>-<seq>": unique across the streams of a session, as the transport requires.
std::string event_id(std::uint64_t stream, std::uint64_t seq);
std::optional<std::pair<std::uint64_t, std::uint64_t>> parse_event_id(std::string_view id);

// Not thread-safe: the owning session's mutex guards it.
class EventStream {
 public:
  struct Limits {
    std::size_t max_events = 1024;       // retained for replay; the oldest go first
    std::size_t max_bytes = 8u << 20;
    std::chrono::milliseconds retry{1000};  // the SSE retry hint in every priming event
    // 2026-07-28 streams cannot be resumed: no priming event, no event ids (a client seeing ids
    // would try a Last-Event-ID GET), nothing kept once written.
    bool resumable = true;
  };

  EventStream(std::uint64_t number, Limits limits) : number_(number), limits_(limits) {}

  std::uint64_t number() const { return number_; }

  // Appends one JSON-RPC message (serialized, one line) and writes it if a connection listens.
  void push(std::string json_text);
  // No more events: the POST stream's response is in. An attached body ends after it.
  void finish();
  bool finished() const { return finished_; }
  std::chrono::steady_clock::time_point finished_at() const { return finished_at_; }

  // Whether Last-Event-ID `seq` names a position of this stream (0: before its first event).
  bool knows(std::uint64_t seq) const { return seq < next_seq_; }

  // Makes `body` the stream's connection (a previous one is ended: never two at once). Writes a
  // priming event (an id and the retry hint, no data), then the events after `after` (without it:
  // those no connection was given yet), then live ones; a finished stream ends the body once
  // everything is out.
  void attach(std::shared_ptr<http::BodyStream> body, std::optional<std::uint64_t> after);
  // The connection went away (only if it is still the attached one).
  void detach(const http::BodyStream* body);
  bool attached() const { return body_ != nullptr; }
  // Ends the attached body without finishing the stream (session ended, server stopping).
  void cut();

  // An SSE comment: dead connections surface as failed writes, proxies keep the stream open.
  void keepalive();

  std::size_t retained_bytes() const { return bytes_; }

 private:
  struct Event {
    std::uint64_t seq;
    std::string data;
  };
  bool send(std::uint64_t seq, const std::string& data);
  void trim();

  std::uint64_t number_;
  Limits limits_;
  std::deque<Event> events_;
  std::size_t bytes_ = 0;
  std::uint64_t next_seq_ = 1;
  std::uint64_t given_upto_ = 0;  // the last event handed to some connection
  bool finished_ = false;
  std::chrono::steady_clock::time_point finished_at_{};
  std::shared_ptr<http::BodyStream> body_;
};

}  // namespace kiln::server::mcp_http
