// Signal thread and helper lookup of cli/process_setup.h.
#include "cli/process_setup.h"

#include <signal.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <filesystem>
#include <thread>

namespace kiln::cli {

std::stop_source stop_on_termination_signals() {
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  std::stop_source stop;
  std::thread([sigs, stop]() mutable {
    int sig = 0;
    if (sigwait(&sigs, &sig) == 0) stop.request_stop();
  }).detach();
  return stop;
}

std::string default_helper_path() {
  if (const char* e = std::getenv("KILN_SANDBOX_HELPER"); e && *e) return e;
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n > 0) {
    buf[n] = '\0';
    auto dir = std::filesystem::path(buf).parent_path();
    for (auto p : {dir / "kiln-sandbox", dir / "../libexec/kiln/kiln-sandbox"})
      if (::access(p.c_str(), X_OK) == 0) return p.lexically_normal().string();
    return (dir / "kiln-sandbox").string();
  }
  return "kiln-sandbox";
}

}  // namespace kiln::cli
