// A tiny blocking HTTP/1.1 client for talking to the local `kiln serve` from processes that have
// no event loop on this path (kiln mcp's tool threads, the CLI): plain POSIX sockets, one deadline.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kiln::server {

struct BlockingResponse {
  int status = 0;
  std::string body;  // de-chunked
};

struct BlockingRequest {
  std::string method = "GET";
  std::string path = "/";
  std::vector<std::pair<std::string, std::string>> headers;  // besides Host, Connection and Content-Length
  std::string body;
  int timeout_ms = 1000;           // one deadline for connect, send and the whole answer
  std::size_t max_body = 65536;    // a longer answer is a failure, not a cut one
};

// "http://HOST:PORT" (numeric host; IPv6 in brackets) -> the answer, or nullopt when no server
// answered in time, the answer was malformed or longer than max_body.
std::optional<BlockingResponse> blocking_http(const std::string& url, const BlockingRequest& req);

}  // namespace kiln::server
