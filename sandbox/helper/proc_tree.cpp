// /proc scanning for kill. The scan is bounded (a fixed number of rounds) so a fork bomb cannot
// hold pid 1 in this loop; whatever survives is caught by the next kill or by the shutdown kill(-1).
#include "sandbox/helper/proc_tree.h"

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <set>
#include <unistd.h>
#include <unordered_map>
#include <vector>

#include "core/proc_stat.h"

namespace kiln::helper {

namespace {

std::vector<pid_t> scan(pid_t shepherd, pid_t session, std::uint64_t* cpu_ticks = nullptr) {
  std::unordered_map<pid_t, ProcStat> procs;
  DIR* d = ::opendir("/proc");
  if (d == nullptr) return {};
  while (dirent* de = ::readdir(d)) {
    char* end = nullptr;
    long v = std::strtol(de->d_name, &end, 10);
    if (end == de->d_name || *end != '\0' || v <= 1) continue;
    if (auto st = read_proc_stat(static_cast<pid_t>(v))) procs.emplace(static_cast<pid_t>(v), *st);
  }
  ::closedir(d);
  std::vector<pid_t> out;
  if (cpu_ticks != nullptr) {
    *cpu_ticks = 0;
    if (auto it = procs.find(shepherd); shepherd > 1 && it != procs.end()) *cpu_ticks += it->second.cpu_ticks();
  }
  for (const auto& [pid, info] : procs) {
    if (pid == shepherd) continue;
    // A zombie is not signalled, but its CPU counts: it moves into its parent's cutime only
    // when the parent reaps it, so at any one scan it is counted exactly once.
    if (info.gone() && cpu_ticks == nullptr) continue;
    bool match = session > 0 && (info.session == session || info.pgrp == session);
    for (pid_t up = info.ppid, hops = 0; !match && up > 1 && hops < 4096; ++hops) {
      if (up == shepherd) match = true;
      auto it = procs.find(up);
      if (it == procs.end()) break;
      up = it->second.ppid;
    }
    if (!match) continue;
    if (cpu_ticks != nullptr) *cpu_ticks += info.cpu_ticks();
    if (!info.gone()) out.push_back(pid);
  }
  return out;
}

}  // namespace

std::uint64_t exec_tree_cpu_ms(pid_t shepherd, pid_t session) {
  static const long hz = ::sysconf(_SC_CLK_TCK) > 0 ? ::sysconf(_SC_CLK_TCK) : 100;
  std::uint64_t ticks = 0;
  scan(shepherd, session, &ticks);
  return ticks * 1000 / static_cast<std::uint64_t>(hz);
}

namespace {

std::uint64_t process_resident_bytes(pid_t pid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/status", pid);
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[4096];
  ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  std::uint64_t kb = 0;
  for (const char* key : {"RssAnon:", "RssShmem:"}) {
    const char* at = std::strstr(buf, key);
    if (at != nullptr) kb += std::strtoull(at + std::strlen(key), nullptr, 10);
  }
  return kb * 1024;
}

}  // namespace

std::uint64_t resident_bytes(pid_t shepherd, pid_t session) {
  std::uint64_t total = 0;
  if (shepherd == 0 && session == 0) {
    DIR* d = ::opendir("/proc");
    if (d == nullptr) return 0;
    while (dirent* de = ::readdir(d)) {
      char* end = nullptr;
      long v = std::strtol(de->d_name, &end, 10);
      if (end == de->d_name || *end != '\0' || v <= 1) continue;
      total += process_resident_bytes(static_cast<pid_t>(v));
    }
    ::closedir(d);
    return total;
  }
  for (pid_t p : scan(shepherd, session)) total += process_resident_bytes(p);
  return total;
}

void signal_exec_tree(pid_t shepherd, pid_t session, int sig) {
  if (session > 1) ::kill(-session, sig);
  if (sig != SIGKILL) {
    for (pid_t p : scan(shepherd, session)) ::kill(p, sig);
    return;
  }
  std::set<pid_t> signalled;
  for (int round = 0; round < 64; ++round) {
    bool fresh = false;
    for (pid_t p : scan(shepherd, session)) {
      if (signalled.insert(p).second) fresh = true;
      ::kill(p, SIGKILL);
    }
    if (!fresh) break;
  }
}

}  // namespace kiln::helper
