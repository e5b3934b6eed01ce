// socket/bind/listen on the sandbox's loopback, and the environment that points tools at it.
#include "sandbox/helper/egress_listener.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>

namespace kiln::helper {

int egress_listen(int& port) {
  int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (s < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  // No SO_REUSEADDR/SO_REUSEPORT: nothing else in the sandbox can bind the same port.
  if (::bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(s, 4096) != 0 ||
      ::getsockname(s, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    int e = errno;
    ::close(s);
    errno = e;
    return -1;
  }
  port = ntohs(addr.sin_port);
  return s;
}

std::vector<std::pair<std::string, std::string>> egress_env(int port, const std::map<std::string, std::string>& env) {
  const std::string url = "http://127.0.0.1:" + std::to_string(port);
  const std::string local = "localhost,127.0.0.1,::1";
  std::vector<std::pair<std::string, std::string>> out;
  for (const char* n : {"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy",
                        "npm_config_proxy", "npm_config_https_proxy", "YARN_HTTP_PROXY", "YARN_HTTPS_PROXY",
                        "PIP_PROXY", "KILN_EGRESS_PROXY"})
    out.emplace_back(n, url);
  for (const char* n : {"NO_PROXY", "no_proxy", "npm_config_noproxy"}) out.emplace_back(n, local);
  int count = 0;
  if (auto it = env.find("GIT_CONFIG_COUNT"); it != env.end()) {
    const auto& v = it->second;
    auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), count);
    if (ec != std::errc() || end != v.data() + v.size() || count < 0 || count > 1000) count = 0;
  }
  const std::string index = std::to_string(count);
  out.emplace_back("GIT_CONFIG_KEY_" + index, "http.proxy");
  out.emplace_back("GIT_CONFIG_VALUE_" + index, url);
  out.emplace_back("GIT_CONFIG_COUNT", std::to_string(count + 1));
  return out;
}

}  // namespace kiln::helper
