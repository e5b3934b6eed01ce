// The request and response a handler of the HTTP listener sees (http/server.h): plain values, no
// sockets, so a router is a pure function that tests and fuzzers call directly.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kiln::server::http {

// What a handler looks at; the listener copies these out of the parsed request.
struct Request {
  std::string method;  // "GET", "HEAD", "POST", ...
  std::string target;  // the raw request-target, exactly as sent
  std::string host;
  std::string authorization;
  std::string cookie;
  std::string if_none_match;
  std::string if_range;
  std::string range;
  std::string content_type;
  std::string accept;
  std::string sec_fetch_mode;
  // Every header field by lower-case name (the first line of a field sent on several), for what
  // the fields above do not cover: an endpoint reads its own headers here (MCP's Mcp-Session-Id).
  // Filled for endpoints and the proxy route only: the server's Handler (every static page) is
  // given the named fields above and nothing here.
  std::map<std::string, std::string, std::less<>> headers;
  std::string body;    // the login form's (at most 4 KiB), or an endpoint's within its own limit
  std::string client;  // remote address, for rate limiting and the access log
  bool client_is_local = false;  // loopback or this host: /healthz tells it the state dir

  // The field of that name (any case), or nullptr: an empty value is still a value.
  const std::string* header(std::string_view name) const;
  // Its value, or empty when absent.
  std::string header_value(std::string_view name) const;
};

// The connection's side of a response body produced over time (Server-Sent Events): each write
// goes out as one HTTP/1.1 chunk, in order. Thread-safe; never blocks.
class BodyStream {
 public:
  virtual ~BodyStream() = default;
  // Queues `bytes`; false (nothing queued) once the body ended or the connection is gone.
  virtual bool write(std::string bytes) = 0;
  // Ends the body after what is queued; the connection may then serve its next request.
  virtual void end() = 0;
};

struct Response {
  int status = 200;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;  // the body unless file_path is set
  // A byte range of an immutable content-addressed blob; the server sends it (sendfile or its
  // small-file cache keyed by file_sha256).
  std::string file_path;
  std::string file_sha256;
  std::uint64_t file_size = 0;  // the whole blob
  std::uint64_t file_offset = 0;
  std::uint64_t file_length = 0;
  bool head = false;  // HEAD: the headers of the GET answer (Content-Length included), no body
  // A streamed body instead of `body`: after the headers (sent with chunked transfer coding) the
  // connection calls stream_start with its BodyStream, on its own thread. stream_closed runs once
  // if the connection goes away (client left, write timeout, shutdown) before the body ended.
  std::function<void(std::shared_ptr<BodyStream>)> stream_start;
  std::function<void()> stream_closed;

  std::uint64_t content_length() const { return file_path.empty() ? body.size() : file_length; }
  // The first header of that name (case-insensitive), or nullptr.
  const std::string* header(std::string_view name) const;
};

// The reason phrase for a status code ("Not Found").
std::string_view reason_phrase(int status);

}  // namespace kiln::server::http
