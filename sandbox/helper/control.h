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
  ControlOut(const ControlOut&) = delete;
  ControlOut& operator=(const ControlOut&) = delete;
  ~ControlOut();
  void send(const std::string& json);
  // Queues `json` with `fd` attached (SCM_RIGHTS); takes ownership and closes it once it is sent.
  void send_fd(const std::string& json, int fd);
  // Returns false when the peer is gone.
  bool flush();
  bool pending() const { return !queue_.empty(); }
  // Descriptors queued and not yet handed over (each is an open fd in this process).
  std::size_t fds_pending() const { return fds_pending_; }

 private:
  struct Out {
    std::string json;
    int fd = -1;
  };
  int fd_;
  std::deque<Out> queue_;
  std::size_t fds_pending_ = 0;
};

}  // namespace kiln::helper
