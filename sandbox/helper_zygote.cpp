// The zygote is started from a thread of its own that lives as long as this object: its death
// signal (PR_SET_PDEATHSIG) follows the thread that started it, and every helper it forks dies
// with it in turn. Requests are one round trip each under a mutex; the zygote's part is a fork of
// a small process, a few hundredths of a millisecond.
#include "sandbox/helper_zygote.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "core/unique_fd.h"
#include "sandbox/helper_link.h"
#include "sandbox/spawn.h"

namespace kiln::sandbox {

namespace {

constexpr int kMaxFailures = 3;
constexpr int kReplyTimeoutMs = 10000;
constexpr auto kReapCheck = std::chrono::seconds(5);

// One message from the zygote within `timeout_ms`: its text and its first fd (any others close).
bool receive(int fd, std::string& text, UniqueFd& attached, int timeout_ms) {
  pollfd p{fd, POLLIN, 0};
  for (;;) {
    int r = ::poll(&p, 1, timeout_ms);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    break;
  }
  std::vector<UniqueFd> fds;
  if (recv_control(fd, text, fds) != 1) return false;
  if (!fds.empty()) attached = std::move(fds.front());
  return true;
}

std::optional<pid_t> parse_pid(const std::string& text) {
  pid_t pid = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), pid);
  if (ec != std::errc() || end != text.data() + text.size() || pid <= 0) return std::nullopt;
  return pid;
}

}  // namespace

struct HelperZygote::Impl {
  std::string helper_path;
  std::mutex mu;  // one request at a time on the socket
  UniqueFd sock;  // our end; closing it ends the zygote
  UniqueFd zygote_pidfd;
  int failures = 0;

  // The keeper thread starts the zygote when asked and otherwise only waits.
  std::mutex keeper_mu;
  std::condition_variable keeper_cv;
  bool start_wanted = false;
  bool start_done = false;
  bool stopping = false;
  UniqueFd started_sock, started_pidfd;
  std::thread keeper;

  void keeper_loop() {
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, nullptr);
    std::unique_lock lk(keeper_mu);
    for (;;) {
      if (!keeper_cv.wait_for(lk, kReapCheck, [&] { return start_wanted || stopping; })) {
        // Idle: a zygote that died (killed from outside) is reaped now rather than left a zombie
        // until the next sandbox finds it gone. Skipped while a request holds the socket.
        lk.unlock();
        if (std::unique_lock m(mu, std::try_to_lock); m && zygote_pidfd) {
          pollfd p{zygote_pidfd.get(), POLLIN, 0};
          if (::poll(&p, 1, 0) == 1) drop();
        }
        lk.lock();
        continue;
      }
      if (stopping) return;
      start_wanted = false;
      lk.unlock();
      UniqueFd ours, pidfd;
      start(ours, pidfd);
      lk.lock();
      started_sock = std::move(ours);
      started_pidfd = std::move(pidfd);
      start_done = true;
      keeper_cv.notify_all();
    }
  }

  // On the keeper thread: spawn `kiln-sandbox --zygote 3` and wait for its ready line.
  void start(UniqueFd& ours, UniqueFd& pidfd) {
    int sp[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) != 0) return;
    UniqueFd mine(sp[0]), theirs(sp[1]);
    UniqueFd devnull(::open("/dev/null", O_RDWR | O_CLOEXEC));
    if (!devnull) return;
    SpawnSpec s;
    s.path = helper_path;
    s.argv = {helper_path, "--zygote", "3"};
    s.fds = {{0, devnull.get()}, {1, devnull.get()}, {2, STDERR_FILENO}, {3, theirs.get()}};
    s.env = helper_environment();
    s.pdeathsig = true;
    auto pid = spawn_process(s);
    if (!pid) return;
    theirs.reset();
    UniqueFd pfd(open_pidfd(*pid));
    std::string text;
    UniqueFd none;
    if (!pfd || !receive(mine.get(), text, none, kReplyTimeoutMs) || parse_pid(text) != *pid) {
      // Not a zygote (an older helper refuses the argument and exits) or not answering.
      ::kill(*pid, SIGKILL);
      int st;
      while (::waitpid(*pid, &st, 0) < 0 && errno == EINTR) {
      }
      return;
    }
    ours = std::move(mine);
    pidfd = std::move(pfd);
  }

  bool ensure_started() {
    if (sock) return true;
    if (failures >= kMaxFailures) return false;
    std::unique_lock lk(keeper_mu);
    if (stopping) return false;
    if (!keeper.joinable()) keeper = std::thread([this] { keeper_loop(); });
    start_wanted = true;
    start_done = false;
    keeper_cv.notify_all();
    keeper_cv.wait(lk, [&] { return start_done || stopping; });
    sock = std::move(started_sock);
    zygote_pidfd = std::move(started_pidfd);
    if (!sock) ++failures;
    return bool(sock);
  }

  // A zygote that misbehaved is ended; the next request starts another (up to kMaxFailures).
  void drop() {
    ++failures;
    sock.reset();
    reap_zygote();
  }

  // The zygote is our child (the keeper thread's): killed if still alive, and reaped.
  void reap_zygote() {
    if (!zygote_pidfd) return;
    ::syscall(SYS_pidfd_send_signal, zygote_pidfd.get(), SIGKILL, nullptr, 0);
    siginfo_t info{};
    while (::waitid(P_PIDFD, id_t(zygote_pidfd.get()), &info, WEXITED) < 0 && errno == EINTR) {
    }
    zygote_pidfd.reset();
  }
};

HelperZygote::HelperZygote(std::string helper_path) : impl_(std::make_unique<Impl>()) {
  impl_->helper_path = std::move(helper_path);
}

HelperZygote::~HelperZygote() {
  {
    std::lock_guard lk(impl_->keeper_mu);
    impl_->stopping = true;
  }
  impl_->keeper_cv.notify_all();
  std::lock_guard lock(impl_->mu);
  impl_->sock.reset();
  if (impl_->keeper.joinable()) impl_->keeper.join();
  impl_->reap_zygote();
}

std::optional<ZygoteChild> HelperZygote::spawn(int spec_fd, int status_fd, int control_fd, bool& sent) {
  sent = false;
  std::lock_guard lock(impl_->mu);
  if (!impl_->ensure_started()) return std::nullopt;
  // One message; a send refused outright (EPIPE: the zygote is gone) took nothing with it, any
  // other failure may have, and the caller then uses fresh fds.
  errno = 0;
  const bool ok = send_message(impl_->sock.get(), "spawn", {spec_fd, status_fd, control_fd});
  sent = ok || !(errno == EPIPE || errno == ECONNRESET || errno == EBADF);
  std::string text;
  UniqueFd pidfd;
  if (!ok || !receive(impl_->sock.get(), text, pidfd, kReplyTimeoutMs)) {
    impl_->drop();
    return std::nullopt;
  }
  auto pid = parse_pid(text);
  if (!pid || !pidfd) {
    // "error": the fork (or its pidfd) failed there. The zygote itself is fine; the caller
    // falls back to exec for this one, which reports whatever the machine refuses.
    return std::nullopt;
  }
  return ZygoteChild{*pid, pidfd.release()};
}

namespace {
// The first version of struct pidfd_info (Linux 6.13+, PIDFD_INFO_SIZE_VER0 = 64 bytes).
struct PidfdInfo {
  std::uint64_t mask;
  std::uint64_t cgroupid;
  std::uint32_t pid, tgid, ppid, ruid, rgid, euid, egid, suid, sgid, fsuid, fsgid;
  std::int32_t exit_code;
};
static_assert(sizeof(PidfdInfo) == 64);
constexpr unsigned long kPidfdGetInfo = _IOWR(0xFF, 11, PidfdInfo);
constexpr std::uint64_t kPidfdInfoExit = 1ULL << 3;
}  // namespace

std::optional<int> pidfd_exit_status(int pidfd) {
  PidfdInfo info{};
  info.mask = kPidfdInfoExit;
  if (::ioctl(pidfd, kPidfdGetInfo, &info) != 0 || (info.mask & kPidfdInfoExit) == 0) return std::nullopt;
  return info.exit_code;
}

}  // namespace kiln::sandbox
