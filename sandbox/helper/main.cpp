// kiln-sandbox entry and its outer process: read the spec, join cgroups, enter the namespaces, fork
// pid 1 and then only wait, so its exit status is the sandbox's.
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <string>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandbox/helper/fd_util.h"
#include "sandbox/helper/init.h"
#include "sandbox/helper/namespaces.h"
#include "sandbox/helper/spec.h"
#include "sandbox/helper/status.h"
#include "sandbox/helper/signals.h"
#include "sandbox/helper/zygote.h"

using namespace kiln::helper;
using kiln::read_all;
using kiln::write_all;

namespace {

constexpr int kSetupFailed = 125;

bool parse_fd(const char* s, int& out) {
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v < 0 || v > 1 << 20) return false;
  out = static_cast<int>(v);
  return true;
}

[[noreturn]] void usage(const char* why) {
  const char* text = "usage: kiln-sandbox --spec-fd S --status-fd T --control-fd C\n"
                     "       kiln-sandbox --zygote Z   (kiln's own: forks one helper per request on socket Z)\n";
  write_all(2, std::string("kiln-sandbox: ") + why + "\n" + text);
  ::_exit(kSetupFailed);
}

[[noreturn]] void fail(Status& status, const StepError& e) {
  status.failed(e);
  status.close();
  ::_exit(kSetupFailed);
}

}  // namespace

int main(int argc, char** argv) {
  int spec_fd = -1, status_fd = -1, control_fd = -1;
  bool forked = false;
  if (argc == 3 && std::string(argv[1]) == "--zygote") {
    int zygote_fd = -1;
    if (!parse_fd(argv[2], zygote_fd) || zygote_fd < 3) usage("bad value for --zygote");
    HelperFds fds = run_zygote(zygote_fd);  // returns in a forked child only
    spec_fd = fds.spec;
    status_fd = fds.status;
    control_fd = fds.control;
    forked = true;
  }
  pid_t original_parent = ::getppid();
  // Die with kiln. Re-check the parent afterwards: it may have died before the prctl.
  bool pdeathsig_ok = ::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) == 0;
  int saved_errno = errno;
  if (::getppid() != original_parent) ::_exit(kSetupFailed);

  for (int i = 1; !forked && i < argc; ++i) {
    std::string a = argv[i];
    int* target = a == "--spec-fd" ? &spec_fd : a == "--status-fd" ? &status_fd : a == "--control-fd" ? &control_fd : nullptr;
    if (target == nullptr) usage(("unknown argument " + a).c_str());
    if (i + 1 >= argc || !parse_fd(argv[++i], *target)) usage(("bad value for " + a).c_str());
  }
  if (spec_fd < 3 || status_fd < 3 || control_fd < 3) usage("all three fds are required and must be >= 3");

  // SIGPIPE would kill us on a closed status pipe; exec children restore the default (signals.h).
  ignore_helper_signals();
  // 0-2 must be taken so received fds never land there.
  for (int fd = 0; fd < 3; ++fd)
    if (::fcntl(fd, F_GETFD) < 0) ::open("/dev/null", O_RDWR);
  // Nothing kiln leaked by mistake may follow us inside.
  const int keep[] = {spec_fd, status_fd, control_fd};
  close_fds_except(keep, 3);
  set_cloexec(spec_fd, true);
  set_cloexec(status_fd, true);
  set_cloexec(control_fd, true);

  Status status(status_fd);
  StepError e;
  int sock_type = 0;
  socklen_t sock_len = sizeof sock_type;
  if (::getsockopt(control_fd, SOL_SOCKET, SO_TYPE, &sock_type, &sock_len) != 0 || sock_type != SOCK_SEQPACKET) {
    fail_plain(e, "spec", "--control-fd must be a SOCK_SEQPACKET socket", "kiln must pass one end of a socketpair");
    fail(status, e);
  }
  std::string text;
  bool read_ok = read_all(spec_fd, text, 1 << 20);
  ::close(spec_fd);
  if (!read_ok) {
    fail_errno(e, "spec", "reading the spec");
    fail(status, e);
  }
  Spec spec;
  if (!parse_spec(text, spec, e)) fail(status, e);
  status.ok("spec");
  if (!pdeathsig_ok) {
    errno = saved_errno;
    fail_errno(e, "pdeathsig", "PR_SET_PDEATHSIG");
    fail(status, e);
  }
  status.ok("pdeathsig");

  if (!join_cgroups(spec, e)) fail(status, e);
  status.ok("cgroup", {{"joined", spec.cgroups.size()}});
  if (!enter_userns(spec, e)) fail(status, e);
  status.ok("userns");
  if (!unshare_namespaces(spec, e)) fail(status, e);
  status.ok("namespaces", {{"net", spec.network != Network::host}});

  // pid 1 blocks SIGCHLD for its signalfd; blocking before fork leaves no window for a lost one.
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  ::sigprocmask(SIG_BLOCK, &chld, nullptr);

  int alive[2];
  if (::pipe2(alive, O_CLOEXEC) != 0) {
    fail_errno(e, "fork_init", "pipe2");
    fail(status, e);
  }
  pid_t pid = ::fork();
  if (pid < 0) {
    fail_errno(e, "fork_init", "fork");
    fail(status, e);
  }
  if (pid == 0) {
    ::close(alive[1]);
    run_init(spec, status, control_fd, alive[0]);
  }
  // The outer only waits: pid 1 owns the status and control fds from here on.
  status.close();
  ::close(control_fd);
  ::close(alive[0]);
  int wstatus = 0;
  for (;;) {
    pid_t r = ::waitpid(pid, &wstatus, 0);
    if (r == pid) break;
    if (r < 0 && errno != EINTR) ::_exit(kSetupFailed);
  }
  if (WIFEXITED(wstatus)) ::_exit(WEXITSTATUS(wstatus));
  ::_exit(128 + (WIFSIGNALED(wstatus) ? WTERMSIG(wstatus) : 0));
}
