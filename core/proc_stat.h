// The one reader of /proc/<pid>/stat for every layer, the kiln-sandbox helper's pid 1 included (it
// allocates nothing): the fields Kiln uses to walk a process tree, meter its CPU and tell a live
// process from a reused pid.
#pragma once

#include <fcntl.h>
#include <sys/types.h>
#include <unistd.h>

#include <charconv>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string_view>

#include "core/fd_io.h"

namespace kiln {

struct ProcStat {
  char state = 0;  // field 3: R, S, D, Z, X, ...
  pid_t ppid = 0;
  pid_t pgrp = 0;
  pid_t session = 0;
  std::uint64_t utime = 0, stime = 0;    // clock ticks
  std::int64_t cutime = 0, cstime = 0;   // reaped children's, clock ticks
  std::uint64_t start_time = 0;          // field 22: clock ticks since boot

  // A zombie or a dying process: it runs no more code and will touch nothing.
  bool gone() const { return state == 'Z' || state == 'X'; }
  // Its own CPU plus what its reaped children used, in clock ticks.
  std::uint64_t cpu_ticks() const {
    return utime + stime + static_cast<std::uint64_t>(cutime < 0 ? 0 : cutime) +
           static_cast<std::uint64_t>(cstime < 0 ? 0 : cstime);
  }
};

// Parses the text of /proc/<pid>/stat. The command name (field 2) may hold spaces and parentheses,
// so the fields are read from after the last ')'. Empty when the text is not such a line.
inline std::optional<ProcStat> parse_proc_stat(std::string_view text) {
  auto close = text.rfind(')');
  if (close == std::string_view::npos) return std::nullopt;
  std::string_view rest = text.substr(close + 1);
  auto next = [&rest]() {
    auto start = rest.find_first_not_of(" \n");
    if (start == std::string_view::npos) return std::string_view();
    rest.remove_prefix(start);
    auto end = rest.find_first_of(" \n");
    std::string_view field = rest.substr(0, end);
    rest.remove_prefix(field.size());
    return field;
  };
  auto number = [](std::string_view f, auto& out) {
    auto [p, ec] = std::from_chars(f.data(), f.data() + f.size(), out);
    return ec == std::errc() && p == f.data() + f.size() && !f.empty();
  };
  ProcStat st;
  std::string_view state = next();
  if (state.size() != 1) return std::nullopt;
  st.state = state[0];
  for (int field = 4; field <= 22; ++field) {
    std::string_view f = next();
    bool ok = true;
    switch (field) {
      case 4: ok = number(f, st.ppid); break;
      case 5: ok = number(f, st.pgrp); break;
      case 6: ok = number(f, st.session); break;
      case 14: ok = number(f, st.utime); break;
      case 15: ok = number(f, st.stime); break;
      case 16: ok = number(f, st.cutime); break;
      case 17: ok = number(f, st.cstime); break;
      case 22: ok = number(f, st.start_time); break;
      default: ok = !f.empty(); break;
    }
    if (!ok) return std::nullopt;
  }
  return st;
}

// Reads and parses /proc/<pid>/stat; empty when the process is gone (or /proc is not there).
inline std::optional<ProcStat> read_proc_stat(pid_t pid) {
  char path[48];
  std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  char buf[1024];  // the line is a few hundred bytes; comm is at most 64
  ssize_t n = read_full(fd, buf, sizeof buf);
  ::close(fd);
  if (n <= 0) return std::nullopt;
  return parse_proc_stat(std::string_view(buf, static_cast<std::size_t>(n)));
}

// Field 22 of a live process: with the pid it names one process per boot. Empty when the process
// is gone or a zombie (which will never touch what it named).
inline std::optional<std::uint64_t> process_start_time(pid_t pid) {
  auto st = read_proc_stat(pid);
  if (!st || st->gone()) return std::nullopt;
  return st->start_time;
}

}  // namespace kiln
