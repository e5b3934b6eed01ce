// Loopback only, by construction: the address is fixed here and only the port comes from kiln, so
// the op cannot be turned into a way out of a sandbox whose network is "none".
#include "sandbox/helper/loopback_connect.h"

#include <arpa/inet.h>
#include <cerrno>
#include <cstring>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace kiln::helper {

namespace {

int refuse(ConnectFailure& why, std::string message) {
  why = {"request", EINVAL, std::move(message)};
  return -1;
}

}  // namespace

int loopback_connect(const nlohmann::json& j, ConnectFailure& why) {
  for (const auto& [key, value] : j.items())
    if (key != "op" && key != "id" && key != "port") return refuse(why, "connect: unknown field '" + key + "'");
  if (!j.contains("port")) return refuse(why, "connect needs a port (1-65535)");
  const auto& p = j["port"];
  if (!p.is_number_integer() || p.get<long long>() < 1 || p.get<long long>() > 65535)
    return refuse(why, "connect: port " + p.dump() + " is not a TCP port (1-65535)");
  const int port = p.get<int>();

  int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (s < 0) {
    int e = errno;
    why = {"connect", e, std::string("socket: ") + std::strerror(e)};
    return -1;
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int rc = ::connect(s, reinterpret_cast<const sockaddr*>(&addr), sizeof addr);
  // EINTR on a non-blocking connect: the handshake goes on in the kernel, as with EINPROGRESS.
  if (rc == 0 || errno == EINPROGRESS || errno == EINTR) return s;
  int e = errno;
  ::close(s);
  why = {"connect", e, "connect to 127.0.0.1:" + std::to_string(port) + ": " + std::strerror(e)};
  return -1;
}

}  // namespace kiln::helper
