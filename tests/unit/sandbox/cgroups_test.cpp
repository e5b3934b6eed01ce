// Where Kiln's cgroups go, computed from /proc/self/cgroup and mountinfo.
#include <doctest/doctest.h>

#include "sandbox/cgroups.h"

using namespace kiln::sandbox;

TEST_CASE("v1: each controller under the group this process is in, minus the mount root") {
  std::string cgroup =
      "8:pids:/\n4:memory:/process_api/abc\n2:cpuacct:/\n1:cpu:/\n0::/\n";
  std::string mountinfo =
      "31 30 0:28 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
      "32 30 0:29 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct\n"
      "34 30 0:31 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
      "38 30 0:35 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids\n"
      "40 30 0:37 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
  auto l = compute_cgroup_layout(cgroup, mountinfo);
  CHECK(l.version == CgroupVersion::v1);
  CHECK(l.bases.at("memory") == "/sys/fs/cgroup/memory/process_api/abc/kiln");
  CHECK(l.bases.at("pids") == "/sys/fs/cgroup/pids/kiln");
  CHECK(l.bases.at("cpuacct") == "/sys/fs/cgroup/cpuacct/kiln");
  CHECK(l.bases.at("unified") == "/sys/fs/cgroup/unified/kiln");
}

TEST_CASE("v2 with systemd delegation; a container's mount root is stripped") {
  std::string cgroup = "0::/user.slice/user-1000.slice/user@1000.service/app.slice/kiln.service\n";
  std::string mountinfo = "30 22 0:27 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n";
  auto l = compute_cgroup_layout(cgroup, mountinfo);
  CHECK(l.bases.at("unified") ==
        "/sys/fs/cgroup/user.slice/user-1000.slice/user@1000.service/app.slice/kiln.service/kiln");
  std::string in_container = "0::/docker/abc/inner\n";
  std::string mi = "30 22 0:27 /docker/abc /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";
  CHECK(compute_cgroup_layout(in_container, mi).bases.at("unified") == "/sys/fs/cgroup/inner/kiln");
}

TEST_CASE("no cgroup mounts: none, with a reason") {
  auto l = compute_cgroup_layout("0::/\n", "");
  CHECK(l.version == CgroupVersion::none);
  CHECK(!l.why_none.empty());
}
