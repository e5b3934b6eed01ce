// Exec request validation: strings with NUL bytes, '=' in names or unknown limits are refused
// rather than truncated, so the command run is exactly the one kiln logged.
#include "sandbox/helper/exec_request.h"

#include <unistd.h>

namespace kiln::helper {

namespace {

bool clean(const std::string& s) { return s.find('\0') == std::string::npos; }

struct LimitName {
  const char* key;
  int resource;
  rlim_t scale;
};

const LimitName kLimits[] = {
    {"cpu_s", RLIMIT_CPU, 1},         {"file_size_mb", RLIMIT_FSIZE, 1 << 20},
    {"nofile", RLIMIT_NOFILE, 1},     {"nproc", RLIMIT_NPROC, 1},
    {"as_mb", RLIMIT_AS, 1 << 20},    {"stack_mb", RLIMIT_STACK, 1 << 20},
    {"core_mb", RLIMIT_CORE, 1 << 20}, {"memlock_mb", RLIMIT_MEMLOCK, 1 << 20},
};

}  // namespace

void ExecRequest::finalize() {
  argv_ptrs.clear();
  env_ptrs.clear();
  for (auto& a : argv) argv_ptrs.push_back(a.data());
  argv_ptrs.push_back(nullptr);
  for (auto& v : env) env_ptrs.push_back(v.data());
  env_ptrs.push_back(nullptr);
}

void ExecRequest::close_fds() {
  for (int& f : stdio) {
    if (f >= 0) ::close(f);
    f = -1;
  }
  if (cgroup_fd >= 0) ::close(cgroup_fd);
  cgroup_fd = -1;
}

bool parse_exec(const nlohmann::json& j, const std::string& default_cwd, ExecRequest& req, std::string& error) {
  try {
    for (auto it = j.begin(); it != j.end(); ++it) {
      const std::string& k = it.key();
      const auto& v = it.value();
      if (k == "op" || k == "id") continue;
      if (k == "argv") {
        if (!v.is_array() || v.empty()) return error = "argv must be a non-empty array of strings", false;
        for (const auto& a : v) {
          if (!a.is_string() || !clean(a.get<std::string>()))
            return error = "argv entries must be strings without NUL bytes", false;
          req.argv.push_back(a.get<std::string>());
        }
        if (req.argv[0].empty()) return error = "argv[0] is empty", false;
      } else if (k == "env") {
        if (!v.is_object()) return error = "env must be an object of strings", false;
        for (auto e = v.begin(); e != v.end(); ++e) {
          const std::string& name = e.key();
          if (name.empty() || name.find('=') != std::string::npos || !clean(name))
            return error = "env name '" + name + "' is invalid", false;
          if (!e.value().is_string() || !clean(e.value().get<std::string>()))
            return error = "env value of " + name + " must be a string without NUL bytes", false;
          req.env.push_back(name + "=" + e.value().get<std::string>());
        }
      } else if (k == "cwd") {
        if (!v.is_string() || v.get<std::string>().empty() || v.get<std::string>()[0] != '/' ||
            !clean(v.get<std::string>()))
          return error = "cwd must be an absolute path", false;
        req.cwd = v.get<std::string>();
      } else if (k == "home") {
        if (!v.is_string() || v.get<std::string>().size() < 2 || v.get<std::string>()[0] != '/' ||
            v.get<std::string>().size() >= 4096 || !clean(v.get<std::string>()))
          return error = "home must be an absolute path", false;
        req.home = v.get<std::string>();
      } else if (k == "cpu_ms") {
        if (!v.is_number_unsigned() || v.get<unsigned long long>() == 0)
          return error = "cpu_ms must be a positive integer", false;
        req.cpu_budget_ms = v.get<std::uint64_t>();
      } else if (k == "memory_mb") {
        if (!v.is_number_unsigned() || v.get<unsigned long long>() == 0)
          return error = "memory_mb must be a positive integer", false;
        req.memory_budget_mb = v.get<std::uint64_t>();
      } else if (k == "setsid") {
        if (!v.is_boolean()) return error = "setsid must be a boolean", false;
        req.setsid = v.get<bool>();
      } else if (k == "rlimits") {
        if (!v.is_object()) return error = "rlimits must be an object", false;
        for (auto r = v.begin(); r != v.end(); ++r) {
          const LimitName* found = nullptr;
          for (const auto& l : kLimits)
            if (r.key() == l.key) found = &l;
          if (found == nullptr) return error = "unknown rlimit '" + r.key() + "'", false;
          if (!r.value().is_number_unsigned()) return error = "rlimit " + r.key() + " must be a non-negative integer", false;
          unsigned long long n = r.value().get<unsigned long long>();
          if (n > (~0ULL) / found->scale) return error = "rlimit " + r.key() + " is too large", false;
          req.rlimits.push_back({found->resource, static_cast<rlim_t>(n * found->scale)});
        }
      } else {
        return error = "unknown exec field '" + k + "'", false;
      }
    }
  } catch (const std::exception& ex) {
    return error = std::string("exec request: ") + ex.what(), false;
  }
  if (req.argv.empty()) return error = "argv is required", false;
  if (req.cwd.empty()) req.cwd = default_cwd;
  req.finalize();
  return true;
}

}  // namespace kiln::helper
