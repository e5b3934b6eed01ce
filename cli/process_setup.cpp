// Open-file limit, signal thread and helper lookup of cli/process_setup.h.
#include "cli/process_setup.h"

#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <filesystem>
#include <thread>

namespace kiln::cli {

void raise_open_file_limit() {
  constexpr rlim_t kEnough = 65536;
  rlimit files{};
  if (::getrlimit(RLIMIT_NOFILE, &files) != 0) return;
  const rlim_t want = files.rlim_max == RLIM_INFINITY ? kEnough : std::min(files.rlim_max, kEnough);
  if (files.rlim_cur != RLIM_INFINITY && files.rlim_cur < want) {
    files.rlim_cur = want;
    ::setrlimit(RLIMIT_NOFILE, &files);  // best effort: the old limit still works, with less room
  }
}

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
