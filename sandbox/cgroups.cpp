// Cgroup v1/v2 groups for sandboxes: layout detection, limits, usage, tree kill and cleanup.
#include "sandbox/cgroups.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "core/fd_io.h"
#include "core/owner_tag.h"
#include "core/unique_fd.h"

namespace kiln::sandbox {

namespace {

const char* kV1Controllers[] = {"memory", "pids", "cpuacct"};

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == sep) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

std::string join_path(const std::string& mount, const std::string& mount_root, const std::string& path) {
  std::string rel = path;
  if (mount_root != "/" && rel.starts_with(mount_root)) rel = rel.substr(mount_root.size());
  while (rel.size() > 1 && rel.back() == '/') rel.pop_back();
  if (rel == "/" || rel.empty()) return mount;
  return mount + rel;
}

bool write_file(const std::string& path, const std::string& text) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  ssize_t n = ::write(fd, text.data(), text.size());
  int err = errno;
  ::close(fd);
  errno = err;
  return n == ssize_t(text.size());
}

std::uint64_t keyed_value(const std::string& text, const std::string& key) {
  std::istringstream in(text);
  std::string k;
  std::uint64_t v = 0;
  while (in >> k >> v)
    if (k == key) return v;
  return 0;
}

bool make_dir(const std::string& p) { return ::mkdir(p.c_str(), 0755) == 0 || errno == EEXIST; }

}  // namespace

// Descriptors of a group's statistics files, opened on first read and kept until the group goes.
class CgroupFiles {
 public:
  std::string read(const std::string& path) {
    std::lock_guard lock(mu_);
    if (closed_) return {};
    auto it = fds_.find(path);
    if (it == fds_.end()) it = fds_.emplace(path, UniqueFd(::open(path.c_str(), O_RDONLY | O_CLOEXEC))).first;
    if (!it->second) return {};
    char buf[4096];
    ssize_t n = pread_full(it->second.get(), buf, sizeof buf, 0);
    return n > 0 ? std::string(buf, std::size_t(n)) : std::string();
  }
  void close_all() {
    std::lock_guard lock(mu_);
    fds_.clear();
    closed_ = true;
  }

 private:
  std::mutex mu_;
  std::map<std::string, UniqueFd> fds_;
  bool closed_ = false;
};

namespace {

// A statistics file of a group, through its kept descriptor when there is one.
std::string stat_text(const std::shared_ptr<CgroupFiles>& files, const std::string& path) {
  return files ? files->read(path) : read_small_file(path);
}

std::optional<std::uint64_t> stat_number(const std::shared_ptr<CgroupFiles>& files, const std::string& path) {
  std::string t = stat_text(files, path);
  if (t.empty()) return std::nullopt;
  try {
    return std::stoull(t);
  } catch (...) {
    return std::nullopt;
  }
}

}  // namespace

std::string read_small_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  std::string out;
  (void)read_all(fd, out, 1u << 20);  // a longer file (or a read error) leaves what came before
  ::close(fd);
  return out;
}

CgroupLayout compute_cgroup_layout(const std::string& proc_self_cgroup, const std::string& mountinfo) {
  // controller -> path of this process in that hierarchy; "" key for the v2 unified line.
  std::map<std::string, std::string> own;
  for (const auto& line : split(proc_self_cgroup, '\n')) {
    auto first = line.find(':');
    auto second = first == std::string::npos ? first : line.find(':', first + 1);
    if (second == std::string::npos) continue;
    std::string ctrls = line.substr(first + 1, second - first - 1);
    std::string path = line.substr(second + 1);
    if (ctrls.empty()) {
      own[""] = path;
      continue;
    }
    for (const auto& c : split(ctrls, ',')) own[c] = path;
  }
  CgroupLayout out;
  std::string v2_base;
  for (const auto& line : split(mountinfo, '\n')) {
    auto dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    auto pre = split(line.substr(0, dash), ' ');
    auto post = split(line.substr(dash + 3), ' ');
    if (pre.size() < 5 || post.size() < 3) continue;
    const std::string& root = pre[3];
    const std::string& mnt = pre[4];
    const std::string& fstype = post[0];
    if (fstype == "cgroup2" && own.contains("") && v2_base.empty()) {
      v2_base = join_path(mnt, root, own[""]) + "/kiln";
    } else if (fstype == "cgroup") {
      for (const auto& opt : split(post[2], ',')) {
        for (const char* c : kV1Controllers) {
          if (opt == c && own.contains(c) && !out.bases.contains(c)) out.bases[c] = join_path(mnt, root, own[c]) + "/kiln";
        }
      }
    }
  }
  if (!v2_base.empty()) out.bases["unified"] = v2_base;
  out.version = out.bases.empty() ? CgroupVersion::none : CgroupVersion::v1;
  if (out.bases.empty()) out.why_none = "no cgroup hierarchy is mounted";
  return out;
}

CgroupLayout detect_cgroups() {
  CgroupLayout all = compute_cgroup_layout(read_small_file("/proc/self/cgroup"), read_small_file("/proc/self/mountinfo"));
  CgroupLayout out;
  // v2 when it offers memory and pids to our group's children (a systemd host with delegation).
  if (auto it = all.bases.find("unified"); it != all.bases.end()) {
    std::string own = it->second.substr(0, it->second.size() - 5);  // drop "/kiln"
    std::string avail = read_small_file(own + "/cgroup.controllers");
    if (avail.find("memory") != std::string::npos && avail.find("pids") != std::string::npos &&
        ::access((own + "/cgroup.subtree_control").c_str(), W_OK) == 0) {
      // Our own group holds processes, so controllers can only be handed down from a group
      // that has none: move this server into a leaf first ("no internal processes" rule).
      bool ok = write_file(own + "/cgroup.subtree_control", "+memory +pids +cpu");
      if (!ok && errno == EBUSY) {
        std::string leaf = own + "/kiln-server";
        if (make_dir(leaf) && write_file(leaf + "/cgroup.procs", "0"))
          ok = write_file(own + "/cgroup.subtree_control", "+memory +pids +cpu") ||
               write_file(own + "/cgroup.subtree_control", "+memory +pids");
      }
      if (ok && make_dir(it->second) &&
          (write_file(it->second + "/cgroup.subtree_control", "+memory +pids +cpu") ||
           write_file(it->second + "/cgroup.subtree_control", "+memory +pids"))) {
        out.version = CgroupVersion::v2;
        out.bases["unified"] = it->second;
        return out;
      }
    }
  }
  std::vector<std::string> missing;
  for (const char* c : kV1Controllers) {
    auto it = all.bases.find(c);
    if (it == all.bases.end()) {
      missing.push_back(fmt::format("{} (not mounted)", c));
      continue;
    }
    if (make_dir(it->second) && ::access(it->second.c_str(), W_OK) == 0) {
      out.bases[c] = it->second;
    } else {
      missing.push_back(fmt::format("{} ({} not writable: {})", c, it->second, std::strerror(errno)));
    }
  }
  if (!out.bases.empty()) {
    out.version = CgroupVersion::v1;
  } else {
    out.why_none = "no writable cgroup: " + fmt::format("{}", fmt::join(missing, ", ")) +
                   "; run kiln as a user with a delegated cgroup v2 subtree (systemd-run --user -p Delegate=yes) "
                   "or as root to get cgroup limits";
  }
  return out;
}

Result<CgroupSet> CgroupSet::create(const CgroupLayout& layout, const std::string& name, const Limits& limits) {
  CgroupSet set;
  set.files_ = std::make_shared<CgroupFiles>();
  set.version_ = layout.version;
  for (const auto& [ctrl, base] : layout.bases) {
    std::string dir = base + "/" + name;
    if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
      int err = errno;
      std::vector<std::string> removed, left;
      set.remove(removed, left);
      return fail(Errc::io, fmt::format("cannot create cgroup {}: {}", dir, std::strerror(err)));
    }
    set.dirs_.push_back(dir);
    set.by_controller_[ctrl] = dir;
  }
  auto must = [&](const std::string& path, const std::string& value) -> Result<void> {
    if (write_file(path, value)) return {};
    int err = errno;
    std::vector<std::string> removed, left;
    set.remove(removed, left);
    return fail(Errc::io, fmt::format("cannot set cgroup limit {} = {}: {}", path, value, std::strerror(err)));
  };
  if (limits.memory_mb) {
    std::string bytes = std::to_string(*limits.memory_mb * 1024 * 1024);
    if (set.version_ == CgroupVersion::v2 && set.has("unified")) {
      if (auto r = must(set.dir_of("unified") + "/memory.max", bytes); !r) return std::unexpected(r.error());
      write_file(set.dir_of("unified") + "/memory.swap.max", "0");
    } else if (set.has("memory")) {
      if (auto r = must(set.dir_of("memory") + "/memory.limit_in_bytes", bytes); !r) return std::unexpected(r.error());
      // Without this a memory bomb spills into swap instead of being stopped; absent when the
      // kernel does not account swap, which is fine.
      write_file(set.dir_of("memory") + "/memory.memsw.limit_in_bytes", bytes);
    }
  }
  if (limits.pids) {
    std::string n = std::to_string(*limits.pids);
    if (set.version_ == CgroupVersion::v2 && set.has("unified")) {
      if (auto r = must(set.dir_of("unified") + "/pids.max", n); !r) return std::unexpected(r.error());
    } else if (set.has("pids")) {
      if (auto r = must(set.dir_of("pids") + "/pids.max", n); !r) return std::unexpected(r.error());
    }
  }
  return set;
}

Result<CgroupSet> CgroupSet::child(const std::string& name) const {
  CgroupSet c;
  c.version_ = version_;
  std::string parent = kill_dir();
  if (parent.empty()) return fail(Errc::unsupported, "no cgroup to nest in");
  std::string dir = parent + "/" + name;
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
    return fail(Errc::io, fmt::format("cannot create cgroup {}: {}", dir, std::strerror(errno)));
  c.dirs_.push_back(dir);
  c.by_controller_[version_ == CgroupVersion::v2 ? "unified" : "pids"] = dir;
  return c;
}

std::string CgroupSet::dir_of(const std::string& controller) const {
  auto it = by_controller_.find(controller);
  return it == by_controller_.end() ? std::string() : it->second;
}

std::string CgroupSet::kill_dir() const {
  if (version_ == CgroupVersion::v2) return dir_of("unified");
  return dir_of("pids");
}

CgroupUsage CgroupSet::usage() const {
  CgroupUsage u;
  if (version_ == CgroupVersion::v2) {
    std::string d = dir_of("unified");
    if (d.empty()) return u;
    u.memory_peak_bytes = stat_number(files_, d + "/memory.peak");
    std::string events = stat_text(files_, d + "/memory.events");
    u.oom_kills = keyed_value(events, "oom_kill");
    u.memory_failcnt = keyed_value(events, "max");
    u.pids_max_events = keyed_value(stat_text(files_, d + "/pids.events"), "max");
    if (auto usec = keyed_value(stat_text(files_, d + "/cpu.stat"), "usage_usec")) u.cpu_ns = usec * 1000;
    return u;
  }
  if (auto d = dir_of("memory"); !d.empty()) {
    u.memory_peak_bytes = stat_number(files_, d + "/memory.max_usage_in_bytes");
    u.oom_kills = keyed_value(stat_text(files_, d + "/memory.oom_control"), "oom_kill");
    u.memory_failcnt = stat_number(files_, d + "/memory.failcnt").value_or(0);
  }
  if (auto d = dir_of("pids"); !d.empty()) u.pids_max_events = keyed_value(stat_text(files_, d + "/pids.events"), "max");
  if (auto d = dir_of("cpuacct"); !d.empty()) u.cpu_ns = stat_number(files_, d + "/cpuacct.usage");
  return u;
}

bool CgroupSet::empty() const {
  std::string d = kill_dir();
  if (d.empty()) return true;
  std::string procs = read_small_file(d + "/cgroup.procs");
  return procs.find_first_not_of(" \n") == std::string::npos;
}

int CgroupSet::kill_all(int rounds) const {
  std::string d = kill_dir();
  if (d.empty()) return 0;
  if (version_ == CgroupVersion::v2) write_file(d + "/cgroup.kill", "1");
  int sent = 0;
  for (int i = 0; i < rounds; ++i) {
    // cgroup.procs of nested groups are separate: walk the child folders too.
    std::vector<std::string> folders{d};
    if (DIR* dir = ::opendir(d.c_str())) {
      while (auto* e = ::readdir(dir))
        if (e->d_type == DT_DIR && e->d_name[0] != '.') folders.push_back(d + "/" + e->d_name);
      ::closedir(dir);
    }
    bool any = false;
    for (const auto& f : folders) {
      std::istringstream in(read_small_file(f + "/cgroup.procs"));
      long pid;
      while (in >> pid) {
        if (pid > 1 && ::kill(pid_t(pid), SIGKILL) == 0) ++sent;
        any = true;
      }
    }
    if (!any) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(i < 10 ? 1 : 10));
  }
  return sent;
}

void CgroupSet::remove(std::vector<std::string>& removed, std::vector<std::string>& left) const {
  if (files_) files_->close_all();
  for (const auto& d : dirs_) {
    std::vector<std::string> order;
    if (DIR* dir = ::opendir(d.c_str())) {
      while (auto* e = ::readdir(dir))
        if (e->d_type == DT_DIR && e->d_name[0] != '.') order.push_back(d + "/" + e->d_name);
      ::closedir(dir);
    }
    order.push_back(d);
    for (const auto& p : order) {
      bool ok = false;
      // A killed process leaves its group a moment after it died.
      for (int i = 0; i < 100 && !ok; ++i) {
        ok = ::rmdir(p.c_str()) == 0 || errno == ENOENT;
        if (!ok && errno != EBUSY) break;
        if (!ok) std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
      (ok ? removed : left).push_back(p);
    }
  }
}

std::string cgroup_owner_suffix() {
  static const std::string suffix = "." + kiln::owner_tag();
  return suffix;
}

std::vector<std::string> cleanup_stale_cgroups(const CgroupLayout& layout, int min_age_s) {
  std::vector<std::string> removed;
  const std::time_t now = std::time(nullptr);
  for (const auto& [ctrl, base] : layout.bases) {
    DIR* dir = ::opendir(base.c_str());
    if (!dir) continue;
    std::vector<std::string> names;
    while (auto* e = ::readdir(dir))
      if (e->d_type == DT_DIR && std::strncmp(e->d_name, "sb_", 3) == 0) names.push_back(e->d_name);
    ::closedir(dir);
    for (const auto& n : names) {
      std::string d = base + "/" + n;
      struct stat st {};
      if (::stat(d.c_str(), &st) != 0) continue;
      // The owner's liveness decides; the age rule is only for names without an owner.
      auto alive = kiln::tagged_owner_alive(n);
      if (alive.value_or(now - st.st_mtime < min_age_s)) continue;
      // A live sandbox always has its helper in the group; an empty one lost its server.
      bool busy = false;
      std::vector<std::string> folders{d};
      if (DIR* sub = ::opendir(d.c_str())) {
        while (auto* e = ::readdir(sub))
          if (e->d_type == DT_DIR && e->d_name[0] != '.') folders.push_back(d + "/" + e->d_name);
        ::closedir(sub);
      }
      for (const auto& f : folders)
        if (read_small_file(f + "/cgroup.procs").find_first_not_of(" \n") != std::string::npos) busy = true;
      if (busy) continue;
      for (auto it = folders.rbegin(); it != folders.rend(); ++it)
        if (::rmdir(it->c_str()) == 0) removed.push_back(*it);
    }
  }
  return removed;
}

}  // namespace kiln::sandbox
