// Single-threaded poll loop: control socket, a signalfd for SIGCHLD and one report pipe per live
// exec. Nothing here blocks on a child: waiting is the shepherds' job (pid 1 only reaps, and
// reports the exit of a command whose shepherd was killed from inside).
#include "sandbox/helper/supervisor.h"

#include <cerrno>
#include <csignal>
#include <algorithm>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <map>
#include <memory>
#include <poll.h>
#include <sys/signalfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include "core/fd_io.h"
#include "sandbox/helper/control.h"
#include "sandbox/helper/egress_listener.h"
#include "sandbox/helper/loopback_connect.h"
#include "sandbox/helper/proc_tree.h"
#include "sandbox/helper/shepherd.h"
#include "sandbox/helper/status.h"

namespace kiln::helper {

namespace {

// Each connected socket stays open here until its reply is sent; past this many waiting for a
// reader that does not read, new connects are refused (and egress listeners wait) rather than run
// pid 1 out of descriptors.
constexpr std::size_t kMaxConnectsQueued = 512;

struct ExecRecord {
  nlohmann::json id;
  pid_t shepherd = -1;
  pid_t child = -1;
  int report_fd = -1;
  bool started_sent = false;
  std::uint64_t cpu_budget_ms = 0;  // whole-tree CPU budget (0: not metered)
  std::uint64_t cpu_seen_ms = 0;    // the most CPU the tree was seen to have used
  bool cpu_killed = false;
  std::uint64_t memory_budget_mb = 0;  // whole-sandbox resident memory budget (0: not metered)
  bool memory_killed = false;
  bool exited = false;
  bool failed = false;
  int egress_fd = -1;  // this exec's proxy listener (closed with the record)
  // The request handed to a spare, kept (with its descriptors) until the spare says it has it: a
  // spare killed from inside before that (the kill still landing when the request was sent)
  // never started anything, and the request goes to a shepherd forked for it instead.
  std::unique_ptr<ExecRequest> standby;
  void release_standby() {
    if (!standby) return;
    standby->close_fds();
    standby.reset();
  }
};

class Supervisor {
 public:
  Supervisor(const SandboxContext& ctx, int control_fd) : ctx_(ctx), control_(control_fd), out_(control_fd) {}
  [[noreturn]] void run();

 private:
  void on_control();
  void handle(ControlMessage& msg);
  void start_exec(const nlohmann::json& j, ControlMessage& msg);
  void kill_exec(const nlohmann::json& j);
  void connect_loopback(const nlohmann::json& j);
  void accept_egress(ExecRecord& rec);
  void drop(std::map<std::string, ExecRecord>::iterator it);
  void reap();
  void fork_spare();
  bool hand_to_spare(const ControlMessage& msg, ExecRecord& rec);
  bool fork_shepherd(ExecRequest& req, ExecRecord& rec);
  void meter();
  void meter_memory();
  bool metering() const;
  void read_reports(ExecRecord& rec);
  void send_started(ExecRecord& rec);
  void send_exited(const ExecRecord& rec, int wait_status, timeval user, timeval sys, long maxrss_kb);
  void error(const nlohmann::json& id, const std::string& step, int err, const std::string& message);
  [[noreturn]] void shutdown(int code);

  const SandboxContext& ctx_;
  int control_;
  ControlOut out_;
  int sigfd_ = -1;
  // The pre-forked shepherd for the next exec (see run_spare_shepherd); -1 when there is none.
  pid_t spare_pid_ = -1;
  int spare_job_fd_ = -1;
  int spare_report_fd_ = -1;
  bool want_spare_ = true;
  bool execs_begun_ = false;  // with spec.single_exec, no spare is made once an exec has begun
  std::int64_t last_meter_ms_ = 0;
  std::map<std::string, ExecRecord> execs_;  // keyed by the id's JSON text
};

void Supervisor::error(const nlohmann::json& id, const std::string& step, int err, const std::string& message) {
  nlohmann::json j = {{"op", "error"}, {"id", id}, {"step", step}, {"errno", err}, {"error", message}};
  out_.send(dump_json(j));
}

void Supervisor::shutdown(int code) {
  // pid 1 exiting would kill the namespace anyway; kill(-1) first makes it immediate.
  ::kill(-1, SIGKILL);
  out_.flush();
  ::_exit(code);
}

void Supervisor::run() {
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  sigfd_ = ::signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sigfd_ < 0) shutdown(125);
  std::vector<pollfd> pfds;
  std::vector<std::string> keys;
  for (;;) {
    // Before the first request too: the first exec in a new sandbox (a fresh exec's only one)
    // then finds a shepherd already confined. After that, only once the replies are out (the end
    // of the previous turn): the fork then overlaps with kiln reading them.
    if (want_spare_ && spare_pid_ < 0 && !(ctx_.spec->single_exec && execs_begun_)) fork_spare();
    pfds.clear();
    keys.clear();
    pfds.push_back({control_, static_cast<short>(POLLIN | (out_.pending() ? POLLOUT : 0)), 0});
    pfds.push_back({sigfd_, POLLIN, 0});
    for (auto& [key, rec] : execs_)
      if (rec.report_fd >= 0) {
        pfds.push_back({rec.report_fd, POLLIN, 0});
        keys.push_back(key);
      }
    const std::size_t reports_end = pfds.size();
    // Listeners wait while kiln has not taken the sockets handed over so far.
    if (out_.fds_pending() < kMaxConnectsQueued)
      for (auto& [key, rec] : execs_)
        if (rec.egress_fd >= 0) {
          pfds.push_back({rec.egress_fd, POLLIN, 0});
          keys.push_back(key);
        }
    // A tree CPU budget is checked every 100 ms: cheap enough for pid 1, and tight enough that
    // cpu_s 1 stops near 1 s however the work is spread over short-lived processes.
    int n = ::poll(pfds.data(), pfds.size(), metering() ? 100 : -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      shutdown(125);
    }
    if (metering()) meter();
    if (pfds[1].revents & POLLIN) reap();
    for (std::size_t i = 2; i < pfds.size(); ++i) {
      if (!pfds[i].revents) continue;
      auto it = execs_.find(keys[i - 2]);
      if (it == execs_.end()) continue;
      if (i < reports_end) read_reports(it->second);
      else accept_egress(it->second);
    }
    if (pfds[0].revents & (POLLIN | POLLHUP | POLLERR)) on_control();
    if (!out_.flush()) shutdown(0);
  }
}

void Supervisor::fork_spare() {
  want_spare_ = false;
  int sp[2], rp[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) != 0) return;
  if (::pipe2(rp, O_CLOEXEC) != 0) {
    ::close(sp[0]);
    ::close(sp[1]);
    return;
  }
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(sp[0]);
    ::close(rp[0]);
    run_spare_shepherd(ctx_, sp[1], rp[1]);
  }
  ::close(sp[1]);
  ::close(rp[1]);
  if (pid < 0) {
    ::close(sp[0]);
    ::close(rp[0]);
    return;
  }
  ::fcntl(rp[0], F_SETFL, O_NONBLOCK);
  spare_pid_ = pid;
  spare_job_fd_ = sp[0];
  spare_report_fd_ = rp[0];
}

// Sends the request and its fds to the waiting spare; on success `rec` takes its pid and pipe.
bool Supervisor::hand_to_spare(const ControlMessage& msg, ExecRecord& rec) {
  if (spare_pid_ < 0) return false;
  alignas(cmsghdr) char buf[CMSG_SPACE(sizeof(int) * 4)] = {};
  iovec iov{const_cast<char*>(msg.data.data()), msg.data.size()};
  msghdr mh{};
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  mh.msg_control = buf;
  mh.msg_controllen = CMSG_SPACE(sizeof(int) * msg.fds.size());
  cmsghdr* c = CMSG_FIRSTHDR(&mh);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int) * msg.fds.size());
  std::memcpy(CMSG_DATA(c), msg.fds.data(), sizeof(int) * msg.fds.size());
  ssize_t n;
  do {
    n = ::sendmsg(spare_job_fd_, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
  } while (n < 0 && errno == EINTR);
  ::close(spare_job_fd_);  // either way: a spare takes one job, and an unsent one makes it exit
  spare_job_fd_ = -1;
  if (n != static_cast<ssize_t>(msg.data.size())) {
    ::close(spare_report_fd_);
    spare_report_fd_ = -1;
    ::kill(spare_pid_, SIGKILL);  // reaped like any child; its pid no longer names a spare
    spare_pid_ = -1;
    return false;
  }
  rec.shepherd = spare_pid_;
  rec.report_fd = spare_report_fd_;
  spare_pid_ = -1;
  spare_report_fd_ = -1;
  return true;
}

void Supervisor::on_control() {
  for (;;) {
    ControlMessage msg;
    switch (recv_control(control_, msg)) {
      case RecvResult::again: return;
      case RecvResult::eof:
      case RecvResult::error: shutdown(0);
      case RecvResult::ok: handle(msg); break;
    }
  }
}

void Supervisor::handle(ControlMessage& msg) {
  auto close_all = [&] {
    for (int f : msg.fds) ::close(f);
    msg.fds.clear();
  };
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(msg.data);
  } catch (const std::exception& ex) {
    close_all();
    error(nullptr, "request", EINVAL, std::string("request is not valid JSON: ") + ex.what());
    return;
  }
  nlohmann::json id = j.is_object() && j.contains("id") ? j["id"] : nlohmann::json();
  std::string op = j.is_object() && j.contains("op") && j["op"].is_string() ? j["op"].get<std::string>() : "";
  if (op == "exec") {
    start_exec(j, msg);
  } else if (op == "kill") {
    close_all();
    kill_exec(j);
  } else if (op == "connect") {
    close_all();
    connect_loopback(j);
  } else if (op == "shutdown") {
    close_all();
    shutdown(0);
  } else {
    close_all();
    error(id, "request", EINVAL, "unknown op '" + op + "'");
  }
}

void Supervisor::start_exec(const nlohmann::json& j, ControlMessage& msg) {
  ExecRequest req;
  req.id = j.contains("id") ? j["id"] : nlohmann::json();
  std::string key = dump_json(req.id);
  auto reject = [&](const std::string& text) {
    for (int f : msg.fds) ::close(f);
    msg.fds.clear();
    error(req.id, "request", EINVAL, text);
  };
  if (!(req.id.is_number_integer() || req.id.is_string())) return reject("exec needs an integer or string id");
  if (execs_.count(key)) return reject("exec id " + key + " is still running");
  if (msg.fds_truncated || (msg.fds.size() != 3 && msg.fds.size() != 4))
    return reject("exec needs exactly 3 fds (stdin, stdout, stderr) and optionally a cgroup folder fd, got " +
                  std::to_string(msg.fds.size()));
  // egress: a listener of this exec's own, and the proxy variables pointing at it, added to the
  // request before anyone (a spare shepherd included) parses it.
  int egress_fd = -1;
  nlohmann::json with_egress;
  const nlohmann::json* request = &j;
  if (auto e = j.find("egress"); e != j.end()) {
    if (!e->is_boolean()) return reject("egress must be a boolean");
    with_egress = j;
    with_egress.erase("egress");
    if (e->get<bool>()) {
      int port = 0;
      egress_fd = egress_listen(port);
      if (egress_fd < 0) {
        int le = errno;
        for (int f : msg.fds) ::close(f);
        msg.fds.clear();
        return error(req.id, "egress", le, std::string("cannot listen on the sandbox's 127.0.0.1: ") + std::strerror(le));
      }
      if (!with_egress.contains("env") || !with_egress["env"].is_object()) with_egress["env"] = nlohmann::json::object();
      std::map<std::string, std::string> asked;
      for (auto& [name, value] : with_egress["env"].items())
        if (value.is_string()) asked[name] = value.get<std::string>();
      for (auto& [name, value] : egress_env(port, asked)) with_egress["env"][name] = value;
    }
    msg.data = dump_json(with_egress);
    request = &with_egress;
  }
  std::string err;
  if (!parse_exec(*request, ctx_.spec->workspace, req, err)) {
    if (egress_fd >= 0) ::close(egress_fd);
    return reject(err);
  }
  // Whichever shepherd takes this exec, the next one gets a spare (made at the top of the loop,
  // once this turn's replies are out). Only exec events ask for one, so a command that keeps
  // killing the spare cannot make pid 1 fork in a loop.
  execs_begun_ = true;
  want_spare_ = true;
  for (int i = 0; i < 3; ++i) req.stdio[i] = msg.fds[static_cast<std::size_t>(i)];
  if (msg.fds.size() == 4) req.cgroup_fd = msg.fds[3];
  ExecRecord rec;
  rec.id = req.id;
  rec.egress_fd = egress_fd;
  rec.cpu_budget_ms = req.cpu_budget_ms;
  rec.memory_budget_mb = req.memory_budget_mb;
  if (hand_to_spare(msg, rec)) {
    msg.fds.clear();  // kept in the standby request until the spare says it has its own copies
    rec.standby = std::make_unique<ExecRequest>(std::move(req));
    execs_.emplace(key, std::move(rec));
    return;
  }
  msg.fds.clear();
  if (!fork_shepherd(req, rec)) {
    if (egress_fd >= 0) ::close(egress_fd);
    return;
  }
  execs_.emplace(key, std::move(rec));
}

// Forks a shepherd for `req` (which then confines itself); `rec` takes its pid and report pipe.
// Either way the request's descriptors are closed here; a failure is reported as an error.
bool Supervisor::fork_shepherd(ExecRequest& req, ExecRecord& rec) {
  req.finalize();  // argv/env pointers again: the request may have moved since it was parsed
  int rp[2];
  if (::pipe2(rp, O_CLOEXEC) != 0) {
    int e = errno;
    req.close_fds();
    error(req.id, "fork", e, std::string("pipe2: ") + std::strerror(e));
    return false;
  }
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(rp[0]);
    run_shepherd(req, ctx_, rp[1], false);
  }
  int e = errno;
  ::close(rp[1]);
  req.close_fds();
  if (pid < 0) {
    ::close(rp[0]);
    error(req.id, "fork", e, std::string("fork: ") + std::strerror(e));
    return false;
  }
  ::fcntl(rp[0], F_SETFL, O_NONBLOCK);
  rec.shepherd = pid;
  rec.report_fd = rp[0];
  return true;
}

void Supervisor::kill_exec(const nlohmann::json& j) {
  nlohmann::json id = j.contains("id") ? j["id"] : nlohmann::json();
  int sig = SIGKILL;
  if (j.contains("signal")) {
    if (!j["signal"].is_number_integer() || j["signal"].get<long>() < 1 || j["signal"].get<long>() >= NSIG)
      return error(id, "kill", EINVAL, "signal must be a signal number");
    sig = j["signal"].get<int>();
  }
  auto it = execs_.find(dump_json(id));
  if (it == execs_.end()) return error(id, "kill", ESRCH, "no running exec with id " + dump_json(id));
  ExecRecord& rec = it->second;
  // A stopped exec is never started again: a spare that dies of this signal before it took its
  // request ends the exec (reap), it is not handed on.
  rec.release_standby();
  // Once the command itself is reaped its pid may be reused, so its session no longer names it.
  signal_exec_tree(rec.shepherd, rec.exited ? 0 : rec.child, sig);
  // The shepherd too, once its tree is dead: a command may have stopped it (SIGSTOP, same uid),
  // or stopped the spare that took this exec before it forked, and a stopped shepherd never
  // reports, so the exec would outlive its wall time. Its death is handled like any (reap):
  // a command still unreaped passes to pid 1, which reports its exit; none forked is an error.
  if (sig == SIGKILL && rec.shepherd > 0) ::kill(rec.shepherd, SIGKILL);
}

void Supervisor::accept_egress(ExecRecord& rec) {
  // A bounded batch per wake, so a flood on one listener cannot starve the control channel.
  for (int i = 0; i < 64 && out_.fds_pending() < kMaxConnectsQueued; ++i) {
    int c = ::accept4(rec.egress_fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (c < 0) return;  // EAGAIN, or an aborted connection: the next poll tells
    out_.send_fd(dump_json({{"op", "egress"}, {"id", rec.id}}), c);
  }
}

void Supervisor::drop(std::map<std::string, ExecRecord>::iterator it) {
  if (it->second.egress_fd >= 0) ::close(it->second.egress_fd);
  it->second.release_standby();
  execs_.erase(it);
}

void Supervisor::connect_loopback(const nlohmann::json& j) {
  nlohmann::json id = j.contains("id") ? j["id"] : nlohmann::json();
  if (!(id.is_number_integer() || id.is_string())) return error(id, "request", EINVAL, "connect needs an integer or string id");
  if (out_.fds_pending() >= kMaxConnectsQueued)
    return error(id, "connect", EAGAIN, "too many connections waiting to be handed over; read the replies first");
  ConnectFailure why;
  int s = loopback_connect(j, why);
  if (s < 0) return error(id, why.step, why.err, why.message);
  out_.send_fd(dump_json({{"op", "connected"}, {"id", id}}), s);
}

bool Supervisor::metering() const {
  for (const auto& [key, rec] : execs_)
    if ((rec.cpu_budget_ms || rec.memory_budget_mb) && !rec.exited && !rec.cpu_killed && !rec.memory_killed)
      return true;
  return false;
}

void Supervisor::meter() {
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  std::int64_t now_ms = static_cast<std::int64_t>(now.tv_sec) * 1000 + now.tv_nsec / 1000000;
  if (now_ms - last_meter_ms_ < 90) return;
  last_meter_ms_ = now_ms;
  meter_memory();
  for (auto& [key, rec] : execs_) {
    if (!rec.cpu_budget_ms || rec.exited || rec.cpu_killed || rec.child <= 0) continue;
    rec.cpu_seen_ms = std::max(rec.cpu_seen_ms, exec_tree_cpu_ms(rec.shepherd, rec.child));
    if (rec.cpu_seen_ms < rec.cpu_budget_ms) continue;
    rec.cpu_killed = true;
    signal_exec_tree(rec.shepherd, rec.child, SIGKILL);
  }
}

// Without a memory cgroup the whole sandbox's resident memory is metered here. Over the budget,
// the exec holding the most is killed; when the memory is held by none of them (orphans of
// finished execs), everything but pid 1 is.
void Supervisor::meter_memory() {
  std::uint64_t budget_mb = 0;
  for (const auto& [key, rec] : execs_)
    if (rec.memory_budget_mb && !rec.exited && !rec.memory_killed)
      budget_mb = budget_mb ? std::min(budget_mb, rec.memory_budget_mb) : rec.memory_budget_mb;
  if (!budget_mb || resident_bytes(0, 0) < (budget_mb << 20)) return;
  ExecRecord* biggest = nullptr;
  std::uint64_t most = 0;
  for (auto& [key, rec] : execs_) {
    if (rec.exited || rec.child <= 0) continue;
    std::uint64_t b = resident_bytes(rec.shepherd, rec.child);
    if (b > most) most = b, biggest = &rec;
  }
  if (biggest != nullptr && most >= (budget_mb << 20) / 4) {
    biggest->memory_killed = true;
    signal_exec_tree(biggest->shepherd, biggest->child, SIGKILL);
    return;
  }
  for (auto& [key, rec] : execs_)
    if (!rec.exited) rec.memory_killed = true;
  ::kill(-1, SIGKILL);
}

void Supervisor::read_reports(ExecRecord& rec) {
  for (;;) {
    ShepherdReport rep{};
    ssize_t n = read_some(rec.report_fd, &rep, sizeof rep);
    if (n < 0 && errno == EAGAIN) return;
    if (n != static_cast<ssize_t>(sizeof rep)) {  // EOF (shepherd gone) or a torn write
      ::close(rec.report_fd);
      rec.report_fd = -1;
      return;
    }
    rep.step[sizeof rep.step - 1] = '\0';
    rep.message[sizeof rep.message - 1] = '\0';
    rec.release_standby();  // any word from the spare means it holds its own copies
    switch (rep.kind) {
      case ReportKind::taken:
        break;
      case ReportKind::forked:
        rec.child = rep.pid;
        break;
      case ReportKind::started:
        rec.child = rep.pid;
        send_started(rec);
        break;
      case ReportKind::failed:
        rec.failed = true;
        error(rec.id, rep.step, rep.err, rep.message);
        break;
      case ReportKind::exited: {
        rec.exited = true;
        auto tv = [](std::int64_t us) { return timeval{static_cast<time_t>(us / 1000000), static_cast<suseconds_t>(us % 1000000)}; };
        send_exited(rec, rep.wait_status, tv(rep.user_us), tv(rep.sys_us), rep.maxrss_kb);
        break;
      }
    }
  }
}

void Supervisor::reap() {
  signalfd_siginfo si;
  while (::read(sigfd_, &si, sizeof si) == static_cast<ssize_t>(sizeof si)) {
  }
  for (;;) {
    int status = 0;
    struct rusage ru {};
    pid_t pid = ::wait4(-1, &status, WNOHANG, &ru);
    if (pid <= 0) return;
    if (pid == spare_pid_) {  // killed from inside (kill -9 -1): forked again after the next exec
      ::close(spare_job_fd_);
      ::close(spare_report_fd_);
      spare_pid_ = spare_job_fd_ = spare_report_fd_ = -1;
      continue;
    }
    // Reports still in the pipes may name this pid (a command's `forked` report).
    for (auto& [key, rec] : execs_)
      if (rec.report_fd >= 0) read_reports(rec);
    for (auto it = execs_.begin(); it != execs_.end(); ++it) {
      ExecRecord& rec = it->second;
      if (rec.shepherd == pid) {
        // The shepherd is dead, so everything it wrote is already in the pipe.
        if (rec.report_fd >= 0) read_reports(rec);
        if (rec.report_fd >= 0) ::close(rec.report_fd);
        rec.report_fd = -1;
        rec.shepherd = -1;
        if (rec.exited || rec.failed) {
          drop(it);
        } else if (rec.standby) {
          // A spare that died before it took the request (killed from inside, the kill landing
          // after the request was sent): nothing ran, so the request goes to a new shepherd.
          std::unique_ptr<ExecRequest> req = std::move(rec.standby);
          if (!fork_shepherd(*req, rec)) drop(it);
        } else if (rec.child <= 0) {
          error(rec.id, "supervise", 0, "the exec's shepherd process died before the command started");
          drop(it);
        } else if (::kill(rec.child, 0) != 0 && errno == ESRCH) {
          // The shepherd reaped the command in the instant it was killed (a kill from outside
          // the tree landing inside its wait4): the command is gone and so is its status. Say
          // so rather than wait for an exit that will never be seen here.
          rec.exited = true;
          send_started(rec);
          out_.send(dump_json({{"op", "exited"}, {"id", rec.id}, {"status_lost", true}, {"signal", 0}}));
          want_spare_ = true;
          drop(it);
        }
        // Otherwise the command (a `kill -9 -1` inside kills its shepherd too) now belongs to
        // pid 1: its exit is reported below when it is reaped here.
        break;
      }
      if (rec.child == pid && !rec.exited) {
        // Only reaped here once its shepherd is gone: report the exit ourselves.
        rec.exited = true;
        send_started(rec);
        send_exited(rec, status, ru.ru_utime, ru.ru_stime, ru.ru_maxrss);
        if (rec.shepherd < 0) drop(it);
        break;
      }
    }
  }
}

void Supervisor::send_started(ExecRecord& rec) {
  if (rec.started_sent) return;
  rec.started_sent = true;
  out_.send(dump_json({{"op", "started"}, {"id", rec.id}, {"pid", rec.child}}));
}

void Supervisor::send_exited(const ExecRecord& rec, int st, timeval user, timeval sys, long maxrss_kb) {
  want_spare_ = true;
  int sig = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
  int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + sig;
  auto ms = [](timeval t) { return static_cast<std::int64_t>(t.tv_sec) * 1000 + t.tv_usec / 1000; };
  nlohmann::json j = {{"op", "exited"},      {"id", rec.id},         {"exit_code", code},
                      {"signal", sig},         {"user_ms", ms(user)}, {"sys_ms", ms(sys)},
                      {"maxrss_kb", maxrss_kb}};
  if (rec.cpu_budget_ms) j["tree_cpu_ms"] = std::max<std::uint64_t>(rec.cpu_seen_ms, ms(user) + ms(sys));
  if (rec.cpu_killed) j["cpu_limit"] = true;
  if (rec.memory_killed) j["memory_limit"] = true;
  out_.send(dump_json(j));
}

}  // namespace

void run_supervisor(const SandboxContext& ctx, int control_fd) {
  Supervisor s(ctx, control_fd);
  s.run();
}

}  // namespace kiln::helper
