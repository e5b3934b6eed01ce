// Internals shared by server.cpp (listener, shutdown), connection*.cpp (one connection) and
// http_file_cache.cpp. Pulls in Asio and Beast: include it from those files only.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>

#include "http/server.h"

namespace kiln::server::http {

namespace net = boost::asio;
using tcp = net::ip::tcp;

// Blobs are immutable and named by their sha256, so a small file read once can be answered from
// memory for as long as the process lives; the cap only bounds memory.
class FileCache {
 public:
  static constexpr std::uint64_t kMaxFile = 64 * 1024;
  static constexpr std::uint64_t kMaxTotal = 64 * 1024 * 1024;
  // nullptr if the file cannot be read or is not `size` bytes long.
  std::shared_ptr<const std::string> get(const std::string& sha256, const std::string& path, std::uint64_t size);

 private:
  std::shared_mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<const std::string>> files_;
  std::uint64_t bytes_ = 0;
};

class Session;

// Lets a proxy decision arrive from any thread, even late: it posts to a connection only while the
// server (and so its io_context) exists; ~Server closes it first.
struct ProxyGate {
  std::mutex mu;
  bool open = true;
};

struct Server::Impl {
  Impl(const ServerOptions& o, Handler h)
      : options(o), handler(std::move(h)), contexts(make_contexts(o.io_threads)), ioc(*contexts.front()),
        control(net::make_strand(ioc)), acceptor(control), signals(control), watchdog_timer(control),
        grace_timer(control), retry_timer(control), watched(control) {
    for (std::size_t i = 1; i < contexts.size(); ++i) keep_running.emplace_back(contexts[i]->get_executor());
  }

  ServerOptions options;
  Handler handler;
  std::string host;
  unsigned short port = 0;
  bool loopback = true;

  // Declared before the io_context: handlers it destroys at the end still reach these.
  FileCache cache;
  std::atomic<int> connections{0};
  std::atomic<bool> stopping{false};
  std::mutex sessions_mu;
  std::unordered_map<Session*, std::weak_ptr<Session>> sessions;
  std::chrono::steady_clock::time_point stop_started;
  std::shared_ptr<ProxyGate> proxy_gate = std::make_shared<ProxyGate>();

  // One io_context per io thread, each run by that thread alone (nginx's worker model): a
  // connection lives on one of them from accept to close, so its handlers never change threads
  // and no io thread has to wake another for it. contexts[0] also runs the control strand.
  std::vector<std::unique_ptr<net::io_context>> contexts;
  // Contexts 1.. have no work until a connection arrives; released when the server stops.
  std::vector<net::executor_work_guard<net::io_context::executor_type>> keep_running;
  net::io_context& ioc;  // contexts[0]
  unsigned next_context = 0;  // on the control strand
  net::strand<net::io_context::executor_type> control;  // acceptor, signals, timers
  tcp::acceptor acceptor;
  net::signal_set signals;
  net::steady_timer watchdog_timer;
  net::steady_timer grace_timer;
  net::steady_timer retry_timer;
  net::posix::stream_descriptor watched;  // a dup of options.watch_fd
  // Password checks (Argon2id, deliberately slow) run here, never on an io thread. Declared
  // last so it is joined first, while everything its tasks touch still exists.
  net::thread_pool slow_pool{1};
  // Endpoint handlers (MCP): parsing a large message or creating a session stays off the io threads.
  net::thread_pool endpoint_pool{2};

  static std::vector<std::unique_ptr<net::io_context>> make_contexts(int n) {
    std::vector<std::unique_ptr<net::io_context>> out;
    for (int i = 0; i < std::max(1, n); ++i) out.push_back(std::make_unique<net::io_context>(1));
    return out;
  }
  // Round robin: where the next accepted connection lives.
  net::io_context& next_io() { return *contexts[next_context++ % contexts.size()]; }
  void stop_all() {
    for (auto& c : contexts) c->stop();
  }

  void accept();
  void watch();
  void follow_fd();
  void begin_shutdown();
  void wait_for_sessions();
  void session_ended() { --connections; }
  // The endpoint serving `target` (query ignored), or nullptr for the handler.
  const Endpoint* endpoint_for(std::string_view target) const {
    std::string_view path = target.substr(0, target.find('?'));
    for (const auto& e : options.endpoints) {
      if (e.prefix ? path.starts_with(e.path) : e.path == path) return &e;
    }
    return nullptr;
  }
};

// Starts a session on its own strand for an accepted socket.
void start_session(Server::Impl& server, tcp::socket socket);
// At shutdown: closes idle sessions now; busy ones close after their answer.
void nudge_sessions(Server::Impl& server);
// Closes the connection that has waited longest for a request head, if any does; returns
// whether one was found (it closes on its own strand, soon after).
bool evict_oldest_waiting(Server::Impl& server);

}  // namespace kiln::server::http
