// The kiln side of HELPER_PROTOCOL.md: start kiln-sandbox with its spec, status and control
// fds, read the setup steps, and exchange control messages (with fds) on the SEQPACKET socket.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/unique_fd.h"

namespace kiln::sandbox {

class HelperZygote;

struct HelperStart {
  pid_t pid = -1;
  bool child_of_kiln = true;  // false: forked by the zygote; held by `pidfd` only, never by pid
  int control_fd = -1;  // our end of the control socketpair (CLOEXEC, non-blocking)
  int pidfd = -1;
  nlohmann::json report;                   // the "ready" step's report
  std::vector<std::string> steps;          // step names reported ok, in order
  double ms = 0;
};

// The environment kiln-sandbox is started with (exec'd or as the zygote): PATH only.
std::vector<std::string> helper_environment();

// Starts the helper (forked by `zygote` when it has one, else exec'd) and waits for "ready" (or a
// failed step, turned into an error naming the step, errno and the helper's hint). The helper is
// reaped on failure.
Result<HelperStart> start_helper(const std::string& helper_path, const nlohmann::json& spec, std::stop_token stop,
                                 std::chrono::milliseconds timeout, HelperZygote* zygote = nullptr);

// One control message, with up to 4 fds attached (SCM_RIGHTS). False when the helper is gone, or
// with errno EMSGSIZE when the message is larger than the socket's send buffer can take.
bool send_control(int fd, const nlohmann::json& msg, const std::vector<int>& fds = {});
// The same for a message that is not JSON (the zygote's `spawn`).
bool send_message(int fd, std::string_view text, const std::vector<int>& fds = {});
// Receives one message without blocking: 1 got one, 0 the helper closed the channel, -1 none yet.
int recv_control(int fd, std::string& out);
// The same, keeping the fds a message carries (the `connected` reply's socket; at most 4, received
// CLOEXEC). A message with more is still delivered, the extra fds closed.
int recv_control(int fd, std::string& out, std::vector<UniqueFd>& fds);

}  // namespace kiln::sandbox
