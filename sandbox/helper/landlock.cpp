// Landlock ruleset construction. Debian 12's headers stop at ABI 2, so the newer access bits and
// attribute fields are spelled out here and masked by the ABI the running kernel reports.
#include "sandbox/helper/landlock.h"

#include "core/path_under.h"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <string>
#include <vector>

namespace kiln::helper {

namespace {

constexpr std::uint64_t kExecute = 1ULL << 0;
constexpr std::uint64_t kWriteFile = 1ULL << 1;
constexpr std::uint64_t kReadFile = 1ULL << 2;
constexpr std::uint64_t kReadDir = 1ULL << 3;
constexpr std::uint64_t kRemoveDir = 1ULL << 4;
constexpr std::uint64_t kRemoveFile = 1ULL << 5;
constexpr std::uint64_t kMakeChar = 1ULL << 6;
constexpr std::uint64_t kMakeDir = 1ULL << 7;
constexpr std::uint64_t kMakeReg = 1ULL << 8;
constexpr std::uint64_t kMakeSock = 1ULL << 9;
constexpr std::uint64_t kMakeFifo = 1ULL << 10;
constexpr std::uint64_t kMakeBlock = 1ULL << 11;
constexpr std::uint64_t kMakeSym = 1ULL << 12;
constexpr std::uint64_t kRefer = 1ULL << 13;     // ABI 2
constexpr std::uint64_t kTruncate = 1ULL << 14;  // ABI 3
constexpr std::uint64_t kIoctlDev = 1ULL << 15;  // ABI 5
constexpr std::uint64_t kScopeAbstractUnix = 1ULL << 0;  // ABI 6

constexpr std::uint32_t kCreateVersion = 1U << 0;
constexpr int kRulePathBeneath = 1;

// The kernel accepts any prefix of this struct; the size passed follows the ABI.
struct RulesetAttr {
  std::uint64_t handled_access_fs;
  std::uint64_t handled_access_net;  // ABI 4
  std::uint64_t scoped;              // ABI 6
};

struct __attribute__((packed)) PathBeneathAttr {
  std::uint64_t allowed_access;
  std::int32_t parent_fd;
};

constexpr std::uint64_t kFileOnly = kExecute | kWriteFile | kReadFile | kTruncate | kIoctlDev;

std::uint64_t fs_access_for_abi(int abi) {
  std::uint64_t all = (kMakeSym << 1) - 1;
  if (abi >= 2) all |= kRefer;
  if (abi >= 3) all |= kTruncate;
  if (abi >= 5) all |= kIoctlDev;
  return all;
}

bool add_rule(int ruleset, const std::string& path, std::uint64_t access, std::uint64_t handled, StepError& e) {
  int fd = ::open(path.c_str(), O_PATH | O_CLOEXEC);
  if (fd < 0) return fail_errno(e, "landlock", "opening " + path + " for a rule");
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    fail_errno(e, "landlock", "stat " + path);
    ::close(fd);
    return false;
  }
  PathBeneathAttr attr{};
  attr.allowed_access = access & handled;
  if (!S_ISDIR(st.st_mode)) attr.allowed_access &= kFileOnly;
  attr.parent_fd = fd;
  long rc = ::syscall(SYS_landlock_add_rule, ruleset, kRulePathBeneath, &attr, 0);
  int saved = errno;
  ::close(fd);
  errno = saved;
  if (rc != 0) return fail_errno(e, "landlock", "adding a rule for " + path);
  return true;
}

// Where the read-only binds get their rules. Binds nested in a top-level folder (/etc/passwd,
// /etc/ssl/certs, ...) share one rule on that folder: it holds nothing but what was mounted there
// (a folder of the root skeleton, or a read-only bind itself), and a rule covers everything
// beneath it, so one rule grants what twenty did, without twenty opens and rules per sandbox. A
// folder that holds or lies in a writable mount (or /dev, /proc, /tmp) keeps one rule per bind.
std::vector<std::string> read_only_rule_paths(const Spec& spec, const MountReport& mounts) {
  std::vector<std::string> writable = {"/dev", "/proc", "/tmp", spec.workspace};
  for (const auto& b : spec.data_binds) writable.push_back(b.target);
  std::vector<std::string> out;
  auto add = [&](const std::string& p) {
    if (std::find(out.begin(), out.end(), p) == out.end()) out.push_back(p);
  };
  for (const auto& m : mounts.ro) {
    std::size_t second = m.path.find('/', 1);
    if (second == std::string::npos) {
      add(m.path);
      continue;
    }
    std::string top = m.path.substr(0, second);
    bool shared = std::none_of(writable.begin(), writable.end(),
                               [&](const std::string& w) { return path_under(w, top) || path_under(top, w); });
    add(shared ? top : m.path);
  }
  return out;
}

}  // namespace

bool build_landlock(const Spec& spec, const MountReport& mounts, LandlockRuleset& out, StepError& e) {
  if (!spec.landlock) return true;
  long abi = ::syscall(SYS_landlock_create_ruleset, nullptr, 0, kCreateVersion);
  if (abi < 0) {
    const char* hint = errno == EOPNOTSUPP
                           ? "Landlock is built in but not enabled: add landlock to the kernel's lsm= boot parameter"
                           : "this kernel has no Landlock (Linux 5.13+ with CONFIG_SECURITY_LANDLOCK); "
                             "ask kiln for a policy without Landlock to run with mounts and seccomp only";
    return fail_errno(e, "landlock", "landlock_create_ruleset (ABI query)", hint);
  }
  out.abi = static_cast<int>(abi);
  std::uint64_t handled = fs_access_for_abi(out.abi);
  RulesetAttr attr{};
  attr.handled_access_fs = handled;
  std::size_t size = sizeof(std::uint64_t);
  if (out.abi >= 4) size = 2 * sizeof(std::uint64_t);
  // With the host's network, abstract Unix sockets (dbus, X11, ...) would be shared: scope them.
  // Otherwise the private net namespace already separates them and execs may talk to each other.
  if (out.abi >= 6 && spec.network == Network::host) {
    attr.scoped = kScopeAbstractUnix;
    size = sizeof attr;
  }
  long rs = ::syscall(SYS_landlock_create_ruleset, &attr, size, 0);
  if (rs < 0) return fail_errno(e, "landlock", "landlock_create_ruleset");
  int fd = static_cast<int>(rs);

  const std::uint64_t read_exec = kExecute | kReadFile | kReadDir;
  const std::uint64_t rw = handled & ~(kMakeChar | kMakeBlock);
  bool ok = add_rule(fd, "/", kReadDir, handled, e);
  for (const auto& path : read_only_rule_paths(spec, mounts))
    if (ok) ok = add_rule(fd, path, read_exec, handled, e);
  if (ok) ok = add_rule(fd, spec.workspace, spec.workspace_writable ? rw : read_exec, handled, e);
  if (ok) ok = add_rule(fd, "/tmp", rw, handled, e);
  for (const auto& b : spec.data_binds)
    if (ok) ok = add_rule(fd, b.target, rw, handled, e);
  if (ok) ok = add_rule(fd, "/dev/shm", rw, handled, e);
  // Read-only, like the mount: with Kiln run as root the sandbox's uid 0 is the host's, and /proc/sys
  // checks uid and mode only. Writes through /proc/self/fd/N land on the target's own rule.
  if (ok) ok = add_rule(fd, "/proc", kReadFile | kReadDir, handled, e);
  for (const auto& n : mounts.dev_nodes)
    if (ok) ok = add_rule(fd, n, kReadFile | kWriteFile | kTruncate | kIoctlDev, handled, e);
  if (!ok) {
    ::close(fd);
    return false;
  }
  out.fd = fd;
  return true;
}

bool landlock_enforce(const LandlockRuleset& rs) {
  if (rs.fd < 0) return true;
  return ::syscall(SYS_landlock_restrict_self, rs.fd, 0) == 0;
}

}  // namespace kiln::helper
