// SandboxManager::connect: kiln serve's proxy reaches an app listening on the sandbox's own
// 127.0.0.1. Joining that network namespace needs CAP_SYS_ADMIN a plain user lacks, so the
// sandbox's pid 1 (which lives there) connects and hands the socket over on the control channel.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include <boost/asio/post.hpp>
#include <fmt/format.h>

#include "sandbox/helper_link.h"
#include "sandbox/manager_impl.h"

namespace kiln::sandbox {

using nlohmann::json;
using Pending = std::promise<Result<UniqueFd>>;

namespace {

Error gone_error(const std::string& id) {
  return Error{Errc::not_found, fmt::format("sandbox '{}' is gone (destroyed, reaped, or its helper ended): "
                                            "nothing listens in it any more",
                                            id)};
}

// Isolation none shares the host's network: what pid 1 would do, done here.
Result<UniqueFd> connect_host_loopback(int port) {
  UniqueFd s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!s) return fail(Errc::io, fmt::format("socket: {}", std::strerror(errno)));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(std::uint16_t(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(s.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0 && errno != EINPROGRESS &&
      errno != EINTR)
    return fail(Errc::io, fmt::format("connect to 127.0.0.1:{}: {}", port, std::strerror(errno)));
  return s;
}

}  // namespace

bool SandboxManager::Impl::connect_reply(const std::shared_ptr<Sandbox>& sb, const json& m,
                                         std::vector<UniqueFd>& fds) {
  if (!m.contains("id") || !m["id"].is_number_integer()) return false;
  auto it = sb->connects.find(m["id"].get<int>());
  if (it == sb->connects.end()) return false;
  auto pending = std::move(it->second);
  sb->connects.erase(it);
  const std::string op = m.value("op", "");
  if (op == "connected" && fds.size() == 1) {
    pending->set_value(std::move(fds[0]));
  } else if (op == "connected") {
    pending->set_value(fail(Errc::internal, fmt::format("the sandbox helper answered connect with {} fds, not 1",
                                                        fds.size())));
  } else {
    int err = m.contains("errno") && m["errno"].is_number_integer() ? m["errno"].get<int>() : 0;
    std::string text = m.contains("error") && m["error"].is_string() ? m["error"].get<std::string>() : "unknown error";
    // A refused or unreachable port is the app's state, not a fault of the request.
    Errc code = m.value("step", "") == "request" ? Errc::invalid_argument : Errc::io;
    pending->set_value(fail(code, fmt::format("cannot connect inside sandbox '{}'{}: {}", sb->id,
                                              err == ECONNREFUSED ? " (nothing listens on that port)" : "", text)));
  }
  fds.clear();
  return true;
}

void SandboxManager::Impl::fail_connects(const std::shared_ptr<Sandbox>& sb) {
  auto waiting = std::move(sb->connects);
  sb->connects.clear();
  for (auto& [id, pending] : waiting) pending->set_value(std::unexpected(gone_error(sb->id)));
}

Result<UniqueFd> SandboxManager::connect(const std::string& owner, const std::string& sandbox_id, int port,
                                         std::chrono::milliseconds timeout) {
  auto sb = impl_->find_sandbox_of(sandbox_id, owner);
  bool live = false;
  if (sb) {
    std::lock_guard lock(impl_->mu);
    live = !sb->spare && !sb->closing;
    // Traffic to what runs inside is use of the sandbox (see the idle reaper).
    if (live) sb->last_used = Clock::now();
  }
  if (!live)
    return fail(Errc::not_found, fmt::format("no live sandbox '{}': call sandbox_list to see the live ones (it may "
                                             "have been destroyed or reaped after being idle)",
                                             sandbox_id));
  if (port < 1 || port > 65535)
    return fail(Errc::invalid_argument, fmt::format("port {} is not a TCP port (1-65535)", port));
  if (sb->unsandboxed) return connect_host_loopback(port);

  auto pending = std::make_shared<Pending>();
  auto fut = pending->get_future();
  asio::post(impl_->io, [sb, pending, port] {
    if (sb->closing || sb->helper_gone || !sb->control) return pending->set_value(std::unexpected(gone_error(sb->id)));
    int id = sb->next_exec++;
    sb->connects.emplace(id, pending);
    if (!send_control(sb->control_fd, json{{"op", "connect"}, {"id", id}, {"port", port}})) {
      sb->connects.erase(id);
      pending->set_value(std::unexpected(gone_error(sb->id)));
    }
  });
  if (fut.wait_for(timeout) != std::future_status::ready) {
    // Forget the request; a reply that still comes finds no entry and its socket is closed.
    asio::post(impl_->io, [sb, pending] {
      for (auto it = sb->connects.begin(); it != sb->connects.end(); ++it)
        if (it->second == pending) {
          sb->connects.erase(it);
          break;
        }
    });
    return fail(Errc::io, fmt::format("the sandbox '{}' did not answer a connect to port {} within {} ms; the host "
                                      "may be overloaded",
                                      sandbox_id, port, timeout.count()));
  }
  return fut.get();
}

}  // namespace kiln::sandbox
