// One exec request, validated and flattened into the argv/envp arrays the child passes to execve,
// so nothing between fork and exec has to allocate or parse.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <sys/resource.h>
#include <vector>

namespace kiln::helper {

struct Rlimit {
  int resource;
  rlim_t value;
};

struct ExecRequest {
  nlohmann::json id;
  std::vector<std::string> argv;
  std::vector<std::string> env;  // "NAME=value"
  std::string cwd;
  std::string home;  // created (mkdir -p, best effort) by the child before it runs the command
  std::vector<Rlimit> rlimits;
  bool setsid = true;
  std::uint64_t cpu_budget_ms = 0;  // whole-tree CPU budget metered by pid 1 (0: none)
  std::uint64_t memory_budget_mb = 0;  // whole-sandbox resident memory metered by pid 1 (0: none)
  int stdio[3] = {-1, -1, -1};
  int cgroup_fd = -1;
  // Pointers into argv/env, null-terminated, filled by finalize().
  std::vector<char*> argv_ptrs;
  std::vector<char*> env_ptrs;

  void finalize();
  void close_fds();
};

// `default_cwd` is used when the request has none. Returns false with a message in `error`.
bool parse_exec(const nlohmann::json& j, const std::string& default_cwd, ExecRequest& req, std::string& error);

}  // namespace kiln::helper
