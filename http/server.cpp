// The listener side of `kiln serve`: bind, accept within the connection cap, run the io threads,
// and shut down in two steps (graceful for shutdown_grace, then cut) on a signal or stop().
#include "http/server.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>

#include <charconv>
#include <csignal>
#include <thread>
#include <vector>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "http/server_impl.h"

namespace kiln::server::http {

Result<ListenAddress> parse_listen(std::string_view listen) {
  ListenAddress out;
  std::string_view host, port;
  if (listen.find(':') == std::string_view::npos) {
    host = "127.0.0.1";
    port = listen;
  } else if (listen.starts_with("[")) {
    auto close = listen.find("]:");
    if (close == std::string_view::npos) return fail(Errc::invalid_argument, fmt::format("--listen {}: write IPv6 as [ADDR]:PORT", listen));
    host = listen.substr(1, close - 1);
    port = listen.substr(close + 2);
  } else {
    auto colon = listen.rfind(':');
    host = listen.substr(0, colon);
    port = listen.substr(colon + 1);
    if (host.find(':') != std::string_view::npos) {
      return fail(Errc::invalid_argument, fmt::format("--listen {}: write IPv6 as [ADDR]:PORT", listen));
    }
  }
  unsigned value = 0;
  auto [p, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (port.empty() || ec != std::errc() || p != port.data() + port.size() || value > 65535) {
    return fail(Errc::invalid_argument, fmt::format("--listen {}: the port must be a number from 0 to 65535", listen));
  }
  out.port = static_cast<unsigned short>(value);
  if (host.empty() || host == "*") host = "0.0.0.0";
  if (host == "localhost") host = "127.0.0.1";
  boost::system::error_code bad;
  net::ip::make_address(std::string(host), bad);
  if (bad) {
    return fail(Errc::invalid_argument,
                fmt::format("--listen {}: '{}' is not a numeric address (use 127.0.0.1, 0.0.0.0, [::1], ...)", listen, host));
  }
  out.host = std::string(host);
  return out;
}

void Server::Impl::accept() {
  acceptor.async_accept(next_io(), net::bind_executor(control, [this](boost::system::error_code ec,
                                                                                   tcp::socket socket) {
    if (stopping) return;
    if (ec) {
      if (ec == net::error::operation_aborted) return;
      // Out of file descriptors and the like: make room from a connection that never sent a
      // request, and back off rather than spin.
      if (ec == net::error::no_descriptors) evict_oldest_waiting(*this);
      spdlog::warn("serve: accept failed: {}", ec.message());
      retry_timer.expires_after(std::chrono::milliseconds(100));
      retry_timer.async_wait(net::bind_executor(control, [this](boost::system::error_code e) {
        if (!e && !stopping) accept();
      }));
      return;
    }
    // At the cap, whoever has waited longest without sending a whole request head makes room:
    // a client with a request to send always gets in, however many connections sit idle.
    // (Until the evicted one has closed, the count runs over the cap by the evictions pending.)
    if (connections.load() >= options.max_connections && !evict_oldest_waiting(*this)) {
      static std::atomic<bool> warned{false};
      if (!warned.exchange(true)) {
        spdlog::warn("serve: {} connections open, all of them busy with requests; refusing more", options.max_connections);
      }
      boost::system::error_code ignored;
      socket.close(ignored);
    } else {
      ++connections;
      start_session(*this, std::move(socket));
    }
    accept();
  }));
}

void Server::Impl::watch() {
  if (!options.watchdog || stopping) return;
  watchdog_timer.expires_after(options.watchdog_period);
  watchdog_timer.async_wait(net::bind_executor(control, [this](boost::system::error_code ec) {
    if (ec || stopping) return;
    if (!options.watchdog()) return begin_shutdown();
    watch();
  }));
}

void Server::Impl::follow_fd() {
  if (!watched.is_open() || stopping) return;
  watched.async_wait(net::posix::descriptor_base::wait_read,
                     net::bind_executor(control, [this](boost::system::error_code ec) {
                       if (ec || stopping) return;
                       if (options.on_readable) options.on_readable();
                       follow_fd();
                     }));
}

void Server::Impl::begin_shutdown() {
  if (stopping.exchange(true)) return;
  spdlog::info("serve: shutting down; {} connection(s) open", connections.load());
  boost::system::error_code ignored;
  acceptor.close(ignored);
  signals.cancel(ignored);
  watchdog_timer.cancel();
  retry_timer.cancel();
  watched.cancel(ignored);
  keep_running.clear();  // each io thread returns once its own connections are done
  if (options.on_stopping) options.on_stopping();
  nudge_sessions(*this);
  stop_started = std::chrono::steady_clock::now();
  wait_for_sessions();
}

void Server::Impl::wait_for_sessions() {
  if (connections.load() == 0) return;
  if (std::chrono::steady_clock::now() - stop_started >= options.shutdown_grace) {
    spdlog::warn("serve: {} connection(s) still busy after {} s; closing them", connections.load(),
                 options.shutdown_grace.count());
    stop_all();
    return;
  }
  grace_timer.expires_after(std::chrono::milliseconds(50));
  grace_timer.async_wait(net::bind_executor(control, [this](boost::system::error_code ec) {
    if (!ec) wait_for_sessions();
  }));
}

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Server::~Server() {
  std::lock_guard lock(impl_->proxy_gate->mu);
  impl_->proxy_gate->open = false;
}

Result<std::unique_ptr<Server>> Server::bind(const ServerOptions& options, Handler handler) {
  auto where = parse_listen(options.listen);
  if (!where) return std::unexpected(where.error());
  auto impl = std::make_unique<Impl>(options, std::move(handler));
  boost::system::error_code ec;
  tcp::endpoint ep(net::ip::make_address(where->host), where->port);
  auto& a = impl->acceptor;
  a.open(ep.protocol(), ec);
  if (!ec) a.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) a.bind(ep, ec);
  if (!ec) a.listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    return fail(ec == net::error::address_in_use ? Errc::conflict : Errc::io,
                fmt::format("cannot listen on {}: {}", options.listen, ec.message()));
  }
  auto local = a.local_endpoint(ec);
  if (ec) return fail(Errc::io, fmt::format("cannot listen on {}: {}", options.listen, ec.message()));
  if (options.watch_fd >= 0) {
    int fd = ::dup(options.watch_fd);  // the descriptor object closes its own copy
    if (fd >= 0) impl->watched.assign(fd, ec);
  }
  // Each connection holds a descriptor (two while a large file goes out); the stores, the log and
  // sandboxes' pipes need their own, so the cap leaves them room rather than let accept fail.
  rlimit files{};
  if (::getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur != RLIM_INFINITY) {
    long room = (static_cast<long>(files.rlim_cur) - 256) / 2;
    impl->options.max_connections = static_cast<int>(std::min<long>(impl->options.max_connections, std::max(16L, room)));
  }
  impl->host = where->host;
  impl->port = local.port();
  impl->loopback = ep.address().is_loopback();
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

const std::string& Server::host() const { return impl_->host; }
unsigned short Server::port() const { return impl_->port; }
bool Server::loopback_only() const { return impl_->loopback; }

void Server::run() {
  Impl& s = *impl_;
  boost::system::error_code ec;
  s.signals.add(SIGINT, ec);
  s.signals.add(SIGTERM, ec);
  s.signals.async_wait(net::bind_executor(s.control, [&s](boost::system::error_code e, int sig) {
    if (e) return;
    spdlog::info("serve: {} received", sig == SIGINT ? "SIGINT" : "SIGTERM");
    s.begin_shutdown();
  }));
  net::dispatch(s.control, [&s] {
    s.accept();
    s.watch();
    s.follow_fd();
  });
  auto run_one = [&s](net::io_context& io) {
    try {
      io.run();
    } catch (const std::exception& e) {
      spdlog::critical("serve: io thread stopped: {}", e.what());
      s.stop_all();
    }
  };
  std::vector<std::thread> threads;
  for (std::size_t i = 1; i < s.contexts.size(); ++i) threads.emplace_back([&run_one, io = s.contexts[i].get()] { run_one(*io); });
  run_one(s.ioc);
  for (auto& t : threads) t.join();
  spdlog::info("serve: stopped");
}

void Server::stop() {
  Impl& s = *impl_;
  net::post(s.control, [&s] { s.begin_shutdown(); });
}

}  // namespace kiln::server::http
