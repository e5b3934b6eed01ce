// SEQPACKET framing and fd passing. Peeking with MSG_TRUNC learns a message's length before
// receiving it; any fds beyond what the protocol allows are closed, never kept.
#include "sandbox/helper/control.h"

#include <cerrno>
#include <cstring>
#include <sys/socket.h>
#include <unistd.h>

namespace kiln::helper {

namespace {
constexpr std::size_t kMaxMessage = 8u << 20;
constexpr int kMaxFds = 8;
}  // namespace

RecvResult recv_control(int fd, ControlMessage& msg) {
  char probe;
  ssize_t len;
  do {
    len = ::recv(fd, &probe, 1, MSG_PEEK | MSG_TRUNC | MSG_DONTWAIT);
  } while (len < 0 && errno == EINTR);
  if (len < 0) return (errno == EAGAIN || errno == EWOULDBLOCK) ? RecvResult::again : RecvResult::error;
  // An empty message is not part of the protocol, so 0 means the peer closed its end.
  if (len == 0) return RecvResult::eof;
  if (static_cast<std::size_t>(len) > kMaxMessage) {
    // Drop it whole; the caller answers with an error.
    char small[1];
    ::recv(fd, small, 1, MSG_DONTWAIT);
    msg.data.clear();
    return RecvResult::ok;
  }
  msg.data.assign(static_cast<std::size_t>(len), '\0');
  alignas(cmsghdr) char buf[CMSG_SPACE(sizeof(int) * kMaxFds)];
  iovec iov{msg.data.data(), msg.data.size()};
  msghdr mh{};
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  mh.msg_control = buf;
  mh.msg_controllen = sizeof buf;
  ssize_t n;
  do {
    n = ::recvmsg(fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return RecvResult::error;
  msg.data.resize(static_cast<std::size_t>(n));
  msg.fds_truncated = (mh.msg_flags & MSG_CTRUNC) != 0;
  for (cmsghdr* c = CMSG_FIRSTHDR(&mh); c != nullptr; c = CMSG_NXTHDR(&mh, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    int nfds = static_cast<int>((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
    for (int i = 0; i < nfds; ++i) {
      int f;
      std::memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof f);
      msg.fds.push_back(f);
    }
  }
  return RecvResult::ok;
}

ControlOut::~ControlOut() {
  for (auto& m : queue_)
    if (m.fd >= 0) ::close(m.fd);
}

void ControlOut::send(const std::string& json) { queue_.push_back({json, -1}); }

void ControlOut::send_fd(const std::string& json, int fd) {
  queue_.push_back({json, fd});
  ++fds_pending_;
}

bool ControlOut::flush() {
  while (!queue_.empty()) {
    Out& m = queue_.front();
    iovec iov{m.json.data(), m.json.size()};
    msghdr mh{};
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    alignas(cmsghdr) char buf[CMSG_SPACE(sizeof(int))] = {};
    if (m.fd >= 0) {
      mh.msg_control = buf;
      mh.msg_controllen = sizeof buf;
      cmsghdr* c = CMSG_FIRSTHDR(&mh);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(sizeof(int));
      std::memcpy(CMSG_DATA(c), &m.fd, sizeof(int));
    }
    ssize_t n = ::sendmsg(fd_, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return true;
      return false;
    }
    if (m.fd >= 0) {
      ::close(m.fd);  // the peer has its own copy now
      --fds_pending_;
    }
    queue_.pop_front();
  }
  return true;
}

}  // namespace kiln::helper
