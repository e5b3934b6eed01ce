// The control channel: SOCK_SEQPACKET messages of one JSON object each, requests carrying their
// stdio (and cgroup) fds as SCM_RIGHTS.
#pragma once

#include <deque>
#include <string>
#include <vector>

namespace kiln::helper {

struct ControlMessage {
  std::string data;
  std::vector<int> fds;  // received with O_CLOEXEC; the receiver owns them
  bool fds_truncated = false;
};

enum class RecvResult { ok, eof, again, error };

// Non-blocking; sizes the buffer to the message, so a huge argv is not silently cut.
RecvResult recv_control(int fd, ControlMessage& msg);

// Replies queue up and go out when the socket is writable, so a slow reader never stalls pid 1.
class ControlOut {
 public:
  explicit ControlOut(int fd) : fd_(fd) {}
  void send(const std::string& json);
  // Returns false when the peer is gone.
  bool flush();
  bool pending() const { return !queue_.empty(); }

 private:
  int fd_;
  std::deque<std::string> queue_;
};

}  // namespace kiln::helper
