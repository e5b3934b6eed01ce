// `kiln-sandbox --zygote FD`: a helper process kiln starts once and asks to fork each new sandbox's
// helper, so a sandbox start pays a fork of this small process instead of an execve and the C
// library's start (on x86 VMs, glibc's CPU and cache probing traps to the hypervisor: about 0.6 ms
// of CPU per start, a tenth of a whole sandbox's). HELPER_PROTOCOL.md, "Zygote".
#pragma once

namespace kiln::helper {

// The three fds a forked helper starts with, as `--spec-fd S --status-fd T --control-fd C`.
struct HelperFds {
  int spec = -1;
  int status = -1;
  int control = -1;
};

// Serves requests on the SOCK_SEQPACKET socket `fd` until kiln closes it, then exits. Returns only
// in a forked child, with that request's fds; the child holds nothing else of the zygote's.
HelperFds run_zygote(int fd);

}  // namespace kiln::helper
