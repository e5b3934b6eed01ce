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

namespace kiln::helper {

namespace {

struct ProcInfo {
  pid_t ppid;
  pid_t pgrp;
  pid_t session;
  bool zombie;
};

bool read_stat(pid_t pid, ProcInfo& info) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", pid);
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[1024];
  ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return false;
  buf[n] = '\0';
  // comm may hold spaces and parentheses: fields start after the last ')'.
  char* p = std::strrchr(buf, ')');
  if (p == nullptr) return false;
  char state = 0;
  int ppid = 0, pgrp = 0, session = 0;
  if (std::sscanf(p + 1, " %c %d %d %d", &state, &ppid, &pgrp, &session) != 4) return false;
  info = {ppid, pgrp, session, state == 'Z' || state == 'X'};
  return true;
}

std::vector<pid_t> scan(pid_t shepherd, pid_t session) {
  std::unordered_map<pid_t, ProcInfo> procs;
  DIR* d = ::opendir("/proc");
  if (d == nullptr) return {};
  while (dirent* de = ::readdir(d)) {
    char* end = nullptr;
    long v = std::strtol(de->d_name, &end, 10);
    if (end == de->d_name || *end != '\0' || v <= 1) continue;
    ProcInfo info{};
    if (read_stat(static_cast<pid_t>(v), info)) procs.emplace(static_cast<pid_t>(v), info);
  }
  ::closedir(d);
  std::vector<pid_t> out;
  for (const auto& [pid, info] : procs) {
    if (pid == shepherd || info.zombie) continue;
    bool match = session > 0 && (info.session == session || info.pgrp == session);
    for (pid_t up = info.ppid, hops = 0; !match && up > 1 && hops < 4096; ++hops) {
      if (up == shepherd) match = true;
      auto it = procs.find(up);
      if (it == procs.end()) break;
      up = it->second.ppid;
    }
    if (match) out.push_back(pid);
  }
  return out;
}

}  // namespace

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
