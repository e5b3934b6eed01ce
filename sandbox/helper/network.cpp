// "none" leaves lo down so not even 127.0.0.1 answers; "host" shares the host's stack (no netns),
// which only kiln's explicit policy may ask for.
#include "sandbox/helper/network.h"

#include <cerrno>
#include <cstring>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

namespace kiln::helper {

bool setup_network(const Spec& spec, StepError& e) {
  if (spec.network != Network::loopback) return true;
  int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) return fail_errno(e, "network", "socket(AF_INET)");
  struct ifreq ifr {};
  std::strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
  bool ok = ::ioctl(s, SIOCGIFFLAGS, &ifr) == 0;
  if (ok) {
    ifr.ifr_flags = static_cast<short>(ifr.ifr_flags | IFF_UP | IFF_RUNNING);
    ok = ::ioctl(s, SIOCSIFFLAGS, &ifr) == 0;
  }
  if (!ok) {
    fail_errno(e, "network", "bringing up lo");
    ::close(s);
    return false;
  }
  ::close(s);
  return true;
}

}  // namespace kiln::helper
