// `kiln serve`'s HTTP/1.1 listener (Boost.Beast, after its advanced server): a session per
// connection on a strand, header/body/time limits, graceful then hard shutdown. The rules live in
// the handlers it is given (kiln serve: serve/artifact_router.h); this file only moves bytes. Asio
// and Beast stay inside http/*.cpp.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "http/message.h"
#include "http/proxy.h"

namespace kiln::server::http {

// Answers every request no Endpoint owns. Runs on an io thread, except for a request with
// credentials or a body (a password check may be deliberately slow), which runs on a pool of its own.
using Handler = std::function<Response(const Request&)>;

// A path served by something other than the Handler (MCP at /mcp), with its own body
// limit. The handler runs on a small pool of its own, never on an io thread, so it may parse a
// large body or take a lock; it must still answer promptly (long work belongs in a stream).
struct Endpoint {
  std::string path;  // matched exactly, query ignored (with `prefix`: every path that starts with it)
  std::size_t body_limit = 0;
  std::function<Response(Request)> handler;
  // Asked with the request head alone (empty body) as soon as it is complete, on the io thread,
  // so it must be quick. A refusal it returns goes out at once with `Connection: close` and the
  // body is never read: a caller without a token cannot hold a connection by trickling a body.
  std::function<std::optional<Response>(const Request&)> screen;
  // A family of paths under one folder (kiln serve's one-time secret pages, /_kiln/secret/TOKEN):
  // `path` ends with '/' and the handler decides what lies below it.
  bool prefix = false;
};

struct ServerOptions {
  std::string listen = "127.0.0.1:7700";  // HOST:PORT, [V6]:PORT; port 0 picks a free one
  int io_threads = 2;
  // At the cap, a new connection evicts the oldest one still waiting for its request head, so
  // idle or slow-header connections (slowloris) never lock a real client out. Clamped at bind
  // to what RLIMIT_NOFILE leaves room for.
  int max_connections = 1024;
  // From the start of a read (a new connection, or the end of the previous answer on a
  // keep-alive one) until the whole request head is in.
  std::chrono::seconds header_timeout{10};
  std::chrono::seconds read_timeout{30};   // a request's body, and each write of an answer
  std::chrono::seconds shutdown_grace{5};  // in-flight requests get this long after a stop
  std::size_t header_limit = 8 * 1024;
  std::size_t body_limit = 4 * 1024;  // only the login form has a body (endpoints set their own)
  std::vector<Endpoint> endpoints;
  // Requests it claims are forwarded to an upstream socket (http/proxy.h), without body limit.
  std::optional<ProxyRoute> proxy;
  // How long a streamed response may take to hand one write to the client before the connection
  // is dropped (a client that stopped reading).
  std::chrono::seconds stream_write_timeout{30};
  // Called once when the server starts stopping, before open streams are closed: the last moment
  // to end them with a message of their own.
  std::function<void()> on_stopping;
  // Called every watchdog_period on an io thread; returning false stops the server gracefully.
  std::function<bool()> watchdog;
  std::chrono::seconds watchdog_period{10};
  // A descriptor to watch on the server's own event loop (the serving cache's inotify fd):
  // on_readable runs on an io thread whenever it has something to read.
  int watch_fd = -1;
  std::function<void()> on_readable;
};

struct ListenAddress {
  std::string host;  // numeric, without brackets
  unsigned short port = 0;
};
// "127.0.0.1:7700", "[::1]:7700", "localhost:7700", ":7700" (all interfaces), "7700".
Result<ListenAddress> parse_listen(std::string_view listen);

class Server {
 public:
  // Binds and listens at once, so the real port (for port 0) is known before run().
  static Result<std::unique_ptr<Server>> bind(const ServerOptions& options, Handler handler);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  const std::string& host() const;  // the bound address, numeric
  unsigned short port() const;
  bool loopback_only() const;

  // Serves until stop(), SIGTERM or SIGINT (the caller leaves those unblocked). Then: no new
  // connections, idle ones closed, busy ones finish their response, and whatever is still open
  // after shutdown_grace is cut. Returns when every io thread has finished.
  void run();
  void stop();  // from any thread

  struct Impl;  // opaque: http/server_impl.h, for the server's own .cpp files

 private:
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::server::http
