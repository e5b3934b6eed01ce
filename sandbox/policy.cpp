// Policy merging, environment filtering and the helper spec.
#include "sandbox/policy.h"

#include "core/path_nesting.h"
#include "core/quote.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "core/open_dir.h"
#include "sandbox/secrets.h"

namespace kiln::sandbox {

using nlohmann::json;

const char* to_string(StopReason r) {
  switch (r) {
    case StopReason::exit: return "exit";
    case StopReason::signal: return "signal";
    case StopReason::timeout: return "timeout";
    case StopReason::cpu_limit: return "cpu_limit";
    case StopReason::memory_limit: return "memory_limit";
    case StopReason::pids_limit: return "pids_limit";
    case StopReason::output_limit: return "output_limit";
    case StopReason::disk_limit: return "disk_limit";
    case StopReason::cancelled: return "cancelled";
    case StopReason::killed: return "killed";
    case StopReason::setup_failed: return "setup_failed";
    case StopReason::interrupted: return "interrupted";
  }
  return "exit";
}

const char* to_string(Network n) {
  switch (n) {
    case Network::none: return "none";
    case Network::loopback: return "loopback";
    case Network::host: return "host";
    case Network::allowlist: return "allowlist";
  }
  return "none";
}

Result<Network> parse_network(const std::string& s) {
  if (s == "none") return Network::none;
  if (s == "loopback") return Network::loopback;
  if (s == "host") return Network::host;
  return fail(Errc::invalid_argument,
              fmt::format("network must be \"none\", \"loopback\", \"host\" or an allowlist object like "
                          "{{\"allow\": [\"registry.npmjs.org\"]}}, not \"{}\"",
                          s.substr(0, 100)));
}

namespace {

Result<void> merge_limits(Limits& l, const json& j, const char* where) {
  if (j.is_null()) return {};
  if (!j.is_object()) return fail(Errc::invalid_argument, fmt::format("{}: limits must be an object", where));
  for (const auto& [k, v] : j.items()) {
    if (!v.is_number() || v.get<double>() <= 0)
      return fail(Errc::invalid_argument, fmt::format("{}: limits.{} must be a positive number", where, k));
    double d = v.get<double>();
    auto whole = [&](std::optional<std::uint64_t>& field) -> Result<void> {
      if (d != double(std::uint64_t(d)))
        return fail(Errc::invalid_argument, fmt::format("{}: limits.{} must be a whole number", where, k));
      field = std::uint64_t(d);
      return {};
    };
    Result<void> r;
    if (k == "wall_s") l.wall_s = d;
    else if (k == "cpu_s") l.cpu_s = d;
    else if (k == "memory_mb") r = whole(l.memory_mb);
    else if (k == "pids") r = whole(l.pids);
    else if (k == "output_bytes") r = whole(l.output_bytes);
    else if (k == "file_size_mb") r = whole(l.file_size_mb);
    else if (k == "disk_mb") r = whole(l.disk_mb);
    else
      return fail(Errc::invalid_argument,
                  fmt::format("{}: unknown limit '{}' (known: wall_s, cpu_s, memory_mb, pids, output_bytes, "
                              "file_size_mb, disk_mb)",
                              where, k));
    if (!r) return r;
  }
  return {};
}

bool valid_env_name(const std::string& n) { return valid_secret_name(n); }

Result<void> merge_env(std::map<std::string, std::string>& env, const json& j, const char* where) {
  if (j.is_null()) return {};
  if (!j.is_object()) return fail(Errc::invalid_argument, fmt::format("{}: env must be an object of strings", where));
  for (const auto& [k, v] : j.items()) {
    if (!valid_env_name(k))
      return fail(Errc::invalid_argument, fmt::format("{}: '{}' is not a valid environment variable name", where, bounded(k)));
    if (!v.is_string())
      return fail(Errc::invalid_argument, fmt::format("{}: env.{} must be a string", where, k));
    const auto& s = v.get_ref<const std::string&>();
    if (s.find('\0') != std::string::npos)
      return fail(Errc::invalid_argument, fmt::format("{}: env.{} contains a NUL byte", where, k));
    env[k] = s;
  }
  return {};
}

Result<void> merge_secrets(std::vector<std::string>& out, const json& j, const char* where) {
  if (j.is_null()) return {};
  if (!j.is_array()) return fail(Errc::invalid_argument, fmt::format("{}: secrets must be an array of names", where));
  for (const auto& v : j) {
    if (!v.is_string() || !valid_secret_name(v.get<std::string>()))
      return fail(Errc::invalid_argument, fmt::format("{}: secret names are environment variable names, got {}", where, bounded(v.dump())));
    if (std::find(out.begin(), out.end(), v.get<std::string>()) == out.end()) out.push_back(v.get<std::string>());
  }
  return {};
}

}  // namespace

Result<SandboxPolicy> make_policy(const PolicyInput& in) {
  SandboxPolicy p;
  p.workspace_root = in.workspace_root;
  p.workspace_id = in.workspace_id;
  const json& cfg = in.config_sandbox.is_object() ? in.config_sandbox : json::object();
  const json& args = in.args.is_object() ? in.args : json::object();
  for (const auto* src : {&cfg, &args}) {
    const char* where = src == &cfg ? "kiln.json sandbox" : "arguments";
    if (auto it = src->find("network"); it != src->end() && !it->is_null()) {
      if (it->is_object()) {
        auto e = egress::parse_policy(*it, fmt::format("{}: network", where));
        if (!e) return std::unexpected(e.error());
        p.network = Network::allowlist;
        p.egress = std::move(*e);
      } else if (!it->is_string()) {
        return fail(Errc::invalid_argument,
                    fmt::format("{}: network must be \"none\", \"loopback\", \"host\" or an allowlist object "
                                "like {{\"allow\": [\"registry.npmjs.org\"]}}",
                                where));
      } else {
        auto n = parse_network(it->get<std::string>());
        if (!n) return std::unexpected(n.error());
        p.network = *n;
        p.egress.reset();
      }
    }
    if (auto it = src->find("isolation"); it != src->end() && !it->is_null()) {
      std::string s = it->is_string() ? it->get<std::string>() : "";
      if (s == "strict") p.isolation = Isolation::strict;
      else if (s == "none") p.isolation = Isolation::none;
      else return fail(Errc::invalid_argument, fmt::format("{}: isolation must be \"strict\" or \"none\"", where));
    }
    if (auto r = merge_limits(p.requested, src->value("limits", json()), where); !r) return std::unexpected(r.error());
    if (auto r = merge_env(p.env, src->value("env", json()), where); !r) return std::unexpected(r.error());
    if (auto r = merge_secrets(p.secrets, src->value("secrets", json()), where); !r) return std::unexpected(r.error());
  }
  p.limits = p.requested;
  return p;
}

void apply_default_limits(Limits& l, bool have_cgroup_memory, bool have_cgroup_pids) {
  if (!l.wall_s) l.wall_s = 600;
  if (!l.output_bytes) l.output_bytes = 64ull << 20;
  if (!l.file_size_mb) l.file_size_mb = 1024;
  if (!l.disk_mb) l.disk_mb = 4096;
  // Defaults only where a cgroup enforces them for the whole tree; an RLIMIT_AS default would
  // break programs that reserve address space (JVMs, Go, sanitizers) without being asked.
  if (!l.memory_mb && have_cgroup_memory) l.memory_mb = 2048;
  if (!l.pids && have_cgroup_pids) l.pids = 1024;
}

const std::vector<std::string>& default_ro_binds() {
  static const std::vector<std::string> binds = {
      "/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32",
      "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives", "/etc/ssl/certs", "/etc/ssl/openssl.cnf",
      "/etc/ca-certificates", "/etc/ca-certificates.conf", "/etc/passwd", "/etc/group", "/etc/nsswitch.conf",
      "/etc/hosts", "/etc/resolv.conf", "/etc/localtime", "/etc/timezone", "/etc/os-release",
      "/etc/debian_version", "/etc/protocols", "/etc/services", "/etc/mime.types", "/etc/bash.bashrc",
      "/etc/profile", "/etc/inputrc", "/etc/gitconfig", "/etc/host.conf", "/etc/gai.conf"};
  return binds;
}

std::map<std::string, std::string> sandbox_env(const SandboxPolicy& p,
                                               const std::map<std::string, std::string>& secret_values) {
  std::map<std::string, std::string> env;
  env["PATH"] = kSafePath;
  env["HOME"] = kSandboxHome;
  auto sane = [](const char* v) {
    if (!v || !*v) return false;
    for (const char* c = v; *c; ++c)
      if (!(std::isalnum(static_cast<unsigned char>(*c)) || *c == '.' || *c == '-' || *c == '_' || *c == '@')) return false;
    return std::strlen(v) < 64;
  };
  const char* lang = std::getenv("LANG");
  env["LANG"] = sane(lang) ? lang : "C.UTF-8";
  const char* term = std::getenv("TERM");
  env["TERM"] = sane(term) ? term : "dumb";
  for (const auto& [k, v] : p.env) env[k] = v;
  for (const auto& [k, v] : secret_values) env[k] = v;
  return env;
}

std::vector<std::string> env_strings(const std::map<std::string, std::string>& env) {
  std::vector<std::string> out;
  out.reserve(env.size());
  for (const auto& [k, v] : env) out.push_back(k + "=" + v);
  return out;
}

namespace {

// The host's own folders: a sandbox that had one of them read-write (with Kiln run as root, as
// the host's root) would change the system, not a project.
Result<void> refuse_system_folder(const std::filesystem::path& r) {
  static const char* const kSystem[] = {"/etc", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
                                        "/boot", "/dev", "/proc", "/sys", "/run", "/var", "/root"};
  for (const char* sys : kSystem) {
    std::filesystem::path s(sys);
    auto inside = r.lexically_relative(s);
    bool within = r == s || (!inside.empty() && *inside.begin() != "..");
    bool contains = !s.lexically_relative(r).empty() && *s.lexically_relative(r).begin() != "..";
    // Projects may live under /var (/var/www) but not in the system's own parts of it.
    if (std::string(sys) == "/var" && within && r != s) {
      static const char* const kVarSystem[] = {"/var/lib", "/var/log", "/var/spool", "/var/cache", "/var/mail",
                                               "/var/backups"};
      bool in_system = false;
      for (const char* v : kVarSystem) {
        auto rel = r.lexically_relative(v);
        in_system = in_system || r == v || (!rel.empty() && *rel.begin() != "..");
      }
      if (!in_system) continue;
    }
    if (within || contains)
      return fail(Errc::invalid_argument,
                  fmt::format("refusing to sandbox workspace {}: it {} the system folder {}; open a project folder "
                              "instead",
                              r.string(), within ? "is or lies inside" : "contains", sys));
  }
  return {};
}

}  // namespace

Result<void> check_workspace_root(const std::string& root, const std::string& state_dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path r = fs::weakly_canonical(root, ec);
  if (ec || !r.is_absolute()) return fail(Errc::invalid_argument, fmt::format("workspace {} cannot be resolved", root));
  auto is_within = [](const fs::path& inner, const fs::path& outer) {
    auto rel = inner.lexically_relative(outer);
    return !rel.empty() && *rel.begin() != "..";
  };
  if (r == "/") return fail(Errc::invalid_argument, "refusing to sandbox with / as the workspace: it would expose the whole host");
  if (auto sys = refuse_system_folder(r); !sys) return sys;
  // By device and inode, both ways: a workspace inside the state directory would hand the sandbox
  // the token, the secrets and other principals' traces as plain files.
  if (auto apart = check_apart_from_state_dir(r.string(), state_dir); !apart) return apart;
  // The home folders, resolved once per process: every fresh exec comes through here, and reading
  // the passwd database (NSS) and resolving both paths again each time was most of the check.
  static const std::vector<fs::path> homes = [] {
    std::error_code err;
    std::vector<fs::path> out;
    if (const char* h = std::getenv("HOME"); h && *h) out.push_back(fs::weakly_canonical(h, err));
    if (auto* pw = ::getpwuid(::getuid())) out.push_back(fs::weakly_canonical(pw->pw_dir, err));
    return out;
  }();
  for (const auto& h : homes) {
    if (!h.empty() && h != "/" && is_within(h, r))
      return fail(Errc::invalid_argument,
                  fmt::format("refusing to sandbox workspace {}: it contains the home folder {} (ssh keys, cloud "
                              "credentials); open a project folder inside it instead",
                              r.string(), h.string()));
  }
  return {};
}

json helper_spec(const SandboxPolicy& p, const std::string& id, const std::vector<std::string>& cgroup_dirs) {
  json binds = json::array();
  for (const auto& b : default_ro_binds()) binds.push_back(b);
  json data = json::array();
  for (const auto& b : p.data_binds)
    data.push_back({{"source", b.source}, {"target", b.target}, {"dev", b.dev}, {"ino", b.ino}});
  const bool root_inside = p.hosts_services && ::getuid() == 0;
  Network net = (p.network == Network::none && p.hosts_services) || p.network == Network::allowlist
                    ? Network::loopback
                    : p.network;
  return json{{"id", id},
              {"workspace", p.workspace_root},
              {"workspace_writable", !p.workspace_readonly},
              {"ro_binds", std::move(binds)},
              {"data_binds", std::move(data)},
              {"network", to_string(net)},
              {"hostname", "kiln"},
              {"tmp_size_mb", 512},
              {"uid", root_inside ? kServiceIdForRoot : long(::getuid())},
              {"gid", root_inside ? kServiceIdForRoot : long(::getgid())},
              {"cgroups", cgroup_dirs},
              {"seccomp", true},
              {"landlock", true}};
}

Result<FolderIdentity> workspace_identity(const std::string& root) {
  int fd = open_dir_no_symlinks(root.c_str());
  if (fd < 0) {
    int err = errno;
    if (err == ELOOP)
      return fail(Errc::invalid_argument,
                  fmt::format("workspace {} has a symbolic link in its path now; open the folder it points to", root));
    return fail(Errc::io, fmt::format("cannot open workspace {}: {}", root, std::strerror(err)));
  }
  struct stat st {};
  int rc = ::fstat(fd, &st);
  ::close(fd);
  if (rc != 0) return fail(Errc::io, fmt::format("cannot inspect workspace {}", root));
  return FolderIdentity{std::uint64_t(st.st_dev), std::uint64_t(st.st_ino)};
}

}  // namespace kiln::sandbox
