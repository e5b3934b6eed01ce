// Cgroup limits for sandboxes: where Kiln may create groups on this host (v2 with delegation, or
// the v1 controllers), creating and configuring one group set per sandbox, reading what it used,
// killing everything in it, and removing groups a crashed server left behind.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "sandbox/types.h"

namespace kiln::sandbox {

enum class CgroupVersion { none, v1, v2 };

// Where Kiln's groups go: for each controller (memory, pids, cpuacct on v1; "unified" on v2) the
// folder <mount>/<the cgroup kiln runs in>/kiln. Computed from /proc/self/cgroup and mountinfo.
struct CgroupLayout {
  CgroupVersion version = CgroupVersion::none;
  std::map<std::string, std::string> bases;  // controller -> base folder
  std::string why_none;                        // when version is none: what is missing, in words
};

// Pure computation (unit-tested): which base folder each controller gets.
CgroupLayout compute_cgroup_layout(const std::string& proc_self_cgroup, const std::string& mountinfo);

// The layout of this process, with the base folders created and checked writable. A controller
// whose folder cannot be created is dropped (and said so in why_none when none remain).
CgroupLayout detect_cgroups();

struct CgroupUsage {
  std::optional<std::uint64_t> memory_peak_bytes;
  std::uint64_t oom_kills = 0;      // OOM kills inside the group so far
  std::uint64_t memory_failcnt = 0;
  std::uint64_t pids_max_events = 0;  // fork/clone refused because pids.max was reached
  std::optional<std::uint64_t> cpu_ns;  // whole-tree CPU time
};

class CgroupFiles;

// One sandbox's groups (one folder per v1 controller, or one v2 folder).
class CgroupSet {
 public:
  // Creates <base>/<name> for every controller of `layout` and writes the limits that apply:
  // memory_mb -> memory limit (swap too where accounted), pids -> pids.max.
  static Result<CgroupSet> create(const CgroupLayout& layout, const std::string& name, const Limits& limits);
  // A child group (per exec) of the controller used for killing trees; empty on failure.
  Result<CgroupSet> child(const std::string& name) const;

  const std::vector<std::string>& dirs() const { return dirs_; }
  CgroupVersion version() const { return version_; }
  bool has(const std::string& controller) const { return by_controller_.contains(controller); }
  std::string dir_of(const std::string& controller) const;
  // The folder whose cgroup.procs lists every process of the tree (pids on v1, the group on v2).
  std::string kill_dir() const;

  // Read before and after every exec: through descriptors opened once (kernfs opens were most of
  // its cost), read again from offset 0, which the kernel answers afresh.
  CgroupUsage usage() const;
  // Opens the descriptors usage() reads, so the first exec does not pay for it (make_sandbox
  // calls it while the sandbox is built, before anyone waits).
  void open_stat_files() const { (void)usage(); }
  // Kills every process in the group until it is empty (or `rounds` passes); returns how many
  // signals were sent.
  int kill_all(int rounds = 50) const;
  bool empty() const;
  // rmdir of every folder (children first); returns the folders removed and those left.
  void remove(std::vector<std::string>& removed, std::vector<std::string>& left) const;

 private:
  CgroupVersion version_ = CgroupVersion::none;
  std::vector<std::string> dirs_;
  std::map<std::string, std::string> by_controller_;
  std::shared_ptr<CgroupFiles> files_;  // for usage(); closed by remove()
};

// The name suffix that ties a sandbox's group to the server that made it (".o<pid>-<start time>"),
// so a later start knows at once whether the owner is gone.
std::string cgroup_owner_suffix();

// Removes groups of sandboxes whose server is gone (killed with -9): folders under the bases that
// hold no process and whose owner (named by the suffix above) is no longer running. Groups without
// an owner suffix are only removed once older than `min_age_s`. Returns the folders removed.
std::vector<std::string> cleanup_stale_cgroups(const CgroupLayout& layout, int min_age_s = 30);

// The text of a small kernel file (cgroup, proc); empty on error.
std::string read_small_file(const std::string& path);

}  // namespace kiln::sandbox
