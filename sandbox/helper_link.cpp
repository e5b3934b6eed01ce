// Starting kiln-sandbox and speaking its control protocol.
#include "sandbox/helper_link.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string_view>

#include <fmt/format.h>

#include "core/fd_io.h"
#include "core/sigpipe_blocked.h"
#include "core/unique_fd.h"
#include "sandbox/helper_zygote.h"
#include "sandbox/spawn.h"

namespace kiln::sandbox {

namespace {

// A helper that dies before reading its spec closes the pipe: the write must fail with EPIPE, not
// raise a SIGPIPE that kills the caller (`kiln run`, `kiln verify` and the unit tests do not ignore
// it, kiln mcp does).
bool write_spec(int fd, std::string_view text) {
  SigpipeBlocked no_sigpipe;
  return write_all(fd, text);
}

}  // namespace

using nlohmann::json;

namespace {

std::string errno_name(int e) {
  switch (e) {
    case EPERM: return "EPERM";
    case EACCES: return "EACCES";
    case ENOENT: return "ENOENT";
    case EINVAL: return "EINVAL";
    case ENOSPC: return "ENOSPC";
    case ENOMEM: return "ENOMEM";
    case EBUSY: return "EBUSY";
    case ENOSYS: return "ENOSYS";
    case EAGAIN: return "EAGAIN";
    default: return std::to_string(e);
  }
}

Error setup_error(const json& step, const std::vector<std::string>& done) {
  std::string name = step.value("step", "?");
  int err = step.value("errno", 0);
  std::string msg = fmt::format("sandbox setup failed at step '{}'", name);
  if (err) msg += fmt::format(" ({} {})", errno_name(err), std::strerror(err));
  if (auto e = step.value("error", std::string()); !e.empty()) msg += ": " + e;
  if (auto h = step.value("hint", std::string()); !h.empty()) msg += ". What to do: " + h;
  if (!done.empty()) msg += fmt::format(" (steps that succeeded: {})", fmt::join(done, ", "));
  msg += ". Nothing ran.";
  return Error{Errc::unsupported, std::move(msg)};
}

// Waits for the helper's end (killing it first if asked) and returns its wait status, when known.
std::optional<int> reap(const HelperStart& h, bool kill_first) {
  if (h.pid <= 0) return std::nullopt;
  if (!h.child_of_kiln) {
    // Not our child: its pid may already name another process. Only the pidfd is safe.
    if (kill_first) ::syscall(SYS_pidfd_send_signal, h.pidfd, SIGKILL, nullptr, 0);
    pollfd p{h.pidfd, POLLIN, 0};
    while (::poll(&p, 1, -1) < 0 && errno == EINTR) {
    }
    return pidfd_exit_status(h.pidfd);
  }
  if (kill_first) ::kill(h.pid, SIGKILL);
  int status = 0;
  while (::waitpid(h.pid, &status, 0) < 0) {
    if (errno != EINTR) return std::nullopt;
  }
  return status;
}

}  // namespace

std::vector<std::string> helper_environment() {
  // The helper's environment is not the sandbox's; it needs none of ours.
  std::vector<std::string> env = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin"};
#if defined(__SANITIZE_ADDRESS__)
  // Sanitizer builds only (make test-asan): the helper reports where kiln reports, with the same
  // options. The sandboxed command never sees these; its environment comes from the spec.
  for (const char* name : {"ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS"})
    if (const char* v = std::getenv(name)) env.push_back(fmt::format("{}={}", name, v));
#endif
  return env;
}

Result<HelperStart> start_helper(const std::string& helper_path, const json& spec, std::stop_token stop,
                                 std::chrono::milliseconds timeout, HelperZygote* zygote) {
  auto t0 = std::chrono::steady_clock::now();
  int p[2];
  UniqueFd spec_r, spec_w, status_r, status_w, ctl_ours, ctl_theirs;
  if (::pipe2(p, O_CLOEXEC) != 0) return fail(Errc::io, fmt::format("pipe: {}", std::strerror(errno)));
  spec_r.reset(p[0]);
  spec_w.reset(p[1]);
  if (::pipe2(p, O_CLOEXEC) != 0) return fail(Errc::io, fmt::format("pipe: {}", std::strerror(errno)));
  status_r.reset(p[0]);
  status_w.reset(p[1]);
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, p) != 0)
    return fail(Errc::io, fmt::format("socketpair: {}", std::strerror(errno)));
  ctl_ours.reset(p[0]);
  ctl_theirs.reset(p[1]);

  HelperStart out;
  UniqueFd pidfd_owner;  // closed on every failure path; released into `out` at the end
  bool sent = false;
  if (auto forked = zygote ? zygote->spawn(spec_r.get(), status_w.get(), ctl_theirs.get(), sent) : std::nullopt) {
    out.pid = forked->pid;
    out.pidfd = forked->pidfd;
    out.child_of_kiln = false;
    pidfd_owner.reset(forked->pidfd);
  } else if (sent) {
    // The zygote got these fds and then failed: a child of it may still hold them for a moment
    // (it dies with the zygote, or reads the end of a spec never written). The exec'd helper gets
    // fresh ones; ours close first, which ends any such child.
    for (UniqueFd* f : {&spec_r, &spec_w, &status_r, &status_w, &ctl_ours, &ctl_theirs}) f->reset();
    return start_helper(helper_path, spec, stop, timeout, nullptr);
  } else {
    SpawnSpec s;
    s.path = helper_path;
    s.argv = {helper_path, "--spec-fd", "3", "--status-fd", "4", "--control-fd", "5"};
    // Never the server's own stdin and stdout (the MCP stream) inside the sandbox's pid 1.
    UniqueFd devnull(::open("/dev/null", O_RDWR | O_CLOEXEC));
    if (!devnull) return fail(Errc::io, fmt::format("/dev/null: {}", std::strerror(errno)));
    s.fds = {{0, devnull.get()}, {1, devnull.get()}, {3, spec_r.get()}, {4, status_w.get()}, {5, ctl_theirs.get()}};
    s.env = helper_environment();
    s.pdeathsig = true;
    auto pid = spawn_process(s);
    if (!pid) {
      return fail(Errc::unsupported,
                  fmt::format("cannot start the sandbox helper {}: {}. Build it (ninja kiln-sandbox) next to kiln, "
                              "or set KILN_SANDBOX_HELPER to its path.",
                              helper_path, pid.error().message));
    }
    out.pid = *pid;
  }
  spec_r.reset();
  status_w.reset();
  ctl_theirs.reset();

  std::string text = spec.dump();
  (void)write_spec(spec_w.get(), text);  // a failure means the helper died early; its status fd says why
  spec_w.reset();

  std::string buf;
  std::vector<std::string> done;
  const auto deadline = t0 + timeout;
  bool ready = false;
  for (;;) {
    if (stop.stop_requested()) {
      reap(out, true);
      return fail(Errc::cancelled, "cancelled while the sandbox was being set up");
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      reap(out, true);
      return fail(Errc::unsupported,
                  fmt::format("sandbox setup timed out after {} ms (steps that succeeded: {}); the host may be "
                              "overloaded or the helper stuck",
                              timeout.count(), fmt::join(done, ", ")));
    }
    pollfd pfd{status_r.get(), POLLIN, 0};
    int pr = ::poll(&pfd, 1, int(std::min<long>(left.count(), 50)));
    if (pr < 0 && errno != EINTR) break;
    if (pr <= 0) continue;
    char chunk[4096];
    ssize_t n = read_some(status_r.get(), chunk, sizeof chunk);
    if (n <= 0) break;  // status closed: ready (already seen) or the helper died
    buf.append(chunk, std::size_t(n));
    std::size_t nl;
    while ((nl = buf.find('\n')) != std::string::npos) {
      std::string line = buf.substr(0, nl);
      buf.erase(0, nl + 1);
      json step = json::parse(line, nullptr, false);
      if (step.is_discarded() || !step.is_object()) continue;
      if (!step.value("ok", false)) {
        reap(out, false);
        return std::unexpected(setup_error(step, done));
      }
      if (step.value("step", "") == "ready") {
        out.report = step.value("report", json::object());
        ready = true;
      } else {
        done.push_back(step.value("step", "?"));
      }
    }
    if (ready) break;
  }
  if (!ready) {
    auto status = reap(out, false);
    std::string how = !status                ? std::string("exit status unknown")
                      : WIFEXITED(*status)   ? fmt::format("exit code {}", WEXITSTATUS(*status))
                                             : fmt::format("signal {}", WIFSIGNALED(*status) ? WTERMSIG(*status) : 0);
    return fail(Errc::unsupported,
                fmt::format("the sandbox helper ended during setup without reporting why ({}; steps that succeeded: "
                            "{}). Nothing ran.",
                            how, fmt::join(done, ", ")));
  }
  int fl = ::fcntl(ctl_ours.get(), F_GETFL);
  ::fcntl(ctl_ours.get(), F_SETFL, fl | O_NONBLOCK);
  out.control_fd = ctl_ours.release();
  out.pidfd = out.child_of_kiln ? open_pidfd(out.pid) : pidfd_owner.release();
  out.steps = std::move(done);
  out.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

bool send_control(int fd, const json& msg, const std::vector<int>& fds) { return send_message(fd, msg.dump(), fds); }

bool send_message(int fd, std::string_view text, const std::vector<int>& fds) {
  iovec iov{const_cast<char*>(text.data()), text.size()};
  msghdr mh{};
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  alignas(cmsghdr) char cbuf[CMSG_SPACE(sizeof(int) * 4)];
  if (!fds.empty()) {
    std::memset(cbuf, 0, sizeof cbuf);
    mh.msg_control = cbuf;
    mh.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    cmsghdr* c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  }
  for (int attempt = 0; attempt < 2000; ++attempt) {
    ssize_t n = ::sendmsg(fd, &mh, MSG_NOSIGNAL);
    if (n == ssize_t(text.size())) return true;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) {
      pollfd pfd{fd, POLLOUT, 0};
      ::poll(&pfd, 1, 5);
      continue;
    }
    return false;
  }
  return false;
}

int recv_control(int fd, std::string& out) {
  std::vector<UniqueFd> fds;  // none are expected here; any that come are closed
  return recv_control(fd, out, fds);
}

int recv_control(int fd, std::string& out, std::vector<UniqueFd>& fds) {
  char buf[65536];
  fds.clear();
  for (;;) {
    iovec iov{buf, sizeof buf};
    alignas(cmsghdr) char cbuf[CMSG_SPACE(sizeof(int) * 4)];
    msghdr mh{};
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = cbuf;
    mh.msg_controllen = sizeof cbuf;
    ssize_t n = ::recvmsg(fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n >= 0) {
      for (cmsghdr* c = CMSG_FIRSTHDR(&mh); c != nullptr; c = CMSG_NXTHDR(&mh, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
        std::size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (std::size_t i = 0; i < count; ++i) {
          int f;
          std::memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof f);
          fds.emplace_back(f);
        }
      }
    }
    if (n > 0) {
      out.assign(buf, std::size_t(n));
      return 1;
    }
    if (n == 0) return 0;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return -1;
    return 0;
  }
}

}  // namespace kiln::sandbox
