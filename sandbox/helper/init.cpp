// The second half of the setup, in the order of HELPER_PROTOCOL.md; any failure is reported on the
// status fd and ends pid 1 with 125, which the outer process passes on.
#include "sandbox/helper/init.h"

#include <cerrno>
#include <csignal>
#include <poll.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "sandbox/helper/landlock.h"
#include "sandbox/helper/mounts.h"
#include "sandbox/helper/network.h"
#include "sandbox/helper/sandbox_context.h"
#include "sandbox/helper/seccomp_filter.h"
#include "sandbox/helper/supervisor.h"

namespace kiln::helper {

namespace {

[[noreturn]] void fail(Status& status, const StepError& e) {
  status.failed(e);
  status.close();
  ::_exit(125);
}

}  // namespace

void run_init(const Spec& spec, Status& status, int control_fd, int alive_fd) {
  StepError e;
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0) {
    fail_errno(e, "fork_init", "PR_SET_PDEATHSIG");
    fail(status, e);
  }
  pollfd pf{alive_fd, POLLIN, 0};
  if (::poll(&pf, 1, 0) != 0) {  // readable or hung up: the outer is gone
    fail_plain(e, "fork_init", "the helper's outer process died during setup");
    fail(status, e);
  }
  ::close(alive_fd);
  // Non-dumpable: /proc/1/fd, /proc/1/mem and ptrace stay closed to everything inside. The new
  // session drops kiln's controlling terminal, so nothing here can reach it.
  ::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  ::setsid();
  if (::getpid() != 1) {
    fail_plain(e, "fork_init", "the helper is not pid 1 of its pid namespace");
    fail(status, e);
  }
  status.ok("fork_init");

  MountReport mounts;
  if (!build_root(spec, mounts, e)) fail(status, e);
  status.ok("mounts", {{"skipped", mounts.skipped}});
  if (!enter_root(e)) fail(status, e);
  status.ok("pivot_root");

  if (!setup_network(spec, e)) fail(status, e);
  status.ok("network", {{"mode", network_name(spec.network)}});
  if (::sethostname(spec.hostname.data(), spec.hostname.size()) != 0) {
    fail_errno(e, "hostname", "sethostname");
    fail(status, e);
  }
  status.ok("hostname");

  static SandboxContext ctx;
  ctx.spec = &spec;
  if (!build_landlock(spec, mounts, ctx.landlock, e)) fail(status, e);
  status.ok("landlock", {{"enforced", ctx.landlock.fd >= 0}, {"abi", ctx.landlock.abi}});
  if (spec.seccomp) load_seccomp_program(ctx.seccomp);
  status.ok("seccomp", {{"enforced", !ctx.seccomp.insns.empty()}, {"instructions", ctx.seccomp.insns.size()}});

  nlohmann::json report = {{"network", network_name(spec.network)},
                           {"landlock_abi", ctx.landlock.abi},
                           {"landlock", ctx.landlock.fd >= 0},
                           {"seccomp", !ctx.seccomp.insns.empty()},
                           {"cgroups", spec.cgroups.size()},
                           {"skipped_ro_binds", mounts.skipped},
                           {"proc", {{"read_only", true}, {"masked", mounts.proc.masked}}}};
  status.ok("ready", {{"report", report}});
  status.close();
  run_supervisor(ctx, control_fd);
}

}  // namespace kiln::helper
