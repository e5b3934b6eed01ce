// kiln's end of `kiln-sandbox --zygote` (HELPER_PROTOCOL.md, "Zygote"): one long-lived helper
// process that forks each new sandbox's helper, so a sandbox start costs a fork instead of an
// execve and the C library's start. Falls back to nothing: when the zygote cannot be had, the
// caller exec's the helper as before.
#pragma once

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>

namespace kiln::sandbox {

struct ZygoteChild {
  pid_t pid = -1;
  int pidfd = -1;  // the caller's; the only safe handle (the zygote reaps, so the pid may be reused)
};

class HelperZygote {
 public:
  explicit HelperZygote(std::string helper_path);
  ~HelperZygote();  // the zygote exits, and with it every helper it forked that is still alive
  HelperZygote(const HelperZygote&) = delete;
  HelperZygote& operator=(const HelperZygote&) = delete;

  // A helper forked with these three fds as its spec, status and control fds (kiln keeps its own
  // copies). nullopt: no zygote (it could not start, died, or answered wrongly; after three such
  // failures it is not tried again): start the helper by exec. `sent` says whether the fds went
  // out: then a child may hold them for a moment, so the exec must be given fresh ones.
  std::optional<ZygoteChild> spawn(int spec_fd, int status_fd, int control_fd, bool& sent);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Exit status of a helper that is not kiln's child (waitpid format), once its pidfd is readable;
// nullopt where the kernel cannot say (PIDFD_INFO_EXIT is Linux 6.15+).
std::optional<int> pidfd_exit_status(int pidfd);

}  // namespace kiln::sandbox
