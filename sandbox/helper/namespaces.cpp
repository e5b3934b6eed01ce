// User namespace first (it grants the capabilities the other unshares need), identity id maps so
// files in the workspace keep their real owner, and setgroups denied as unprivileged maps require.
#include "sandbox/helper/namespaces.h"

#include <cerrno>
#include <fcntl.h>
#include <sched.h>
#include <string>
#include <unistd.h>

#include "core/cgroup_join.h"
#include "sandbox/helper/fd_util.h"

namespace kiln::helper {

// The helper is still single-threaded here, so it joins through the move that skips the kernel's
// global lock (core/cgroup_join.h); many sandboxes starting at once no longer queue on it.
bool join_cgroups(const Spec& spec, StepError& e) {
  for (const auto& dir : spec.cgroups) {
    if (!join_cgroup_single_threaded(dir.c_str()))
      return fail_errno(e, "cgroup", "joining cgroup " + dir,
                        "kiln prepares these folders; check that they exist and that this user may write "
                        "their tasks (v1) or cgroup.procs (v2) file");
  }
  return true;
}

bool enter_userns(const Spec& spec, StepError& e) {
  uid_t uid = ::getuid();
  gid_t gid = ::getgid();
  if (::unshare(CLONE_NEWUSER) != 0) {
    std::string hint;
    if (errno == EPERM || errno == ENOSPC || errno == EACCES)
      hint = "user namespaces are disabled or exhausted (sysctl kernel.unprivileged_userns_clone / "
             "user.max_user_namespaces, or an AppArmor/SELinux policy such as "
             "kernel.apparmor_restrict_unprivileged_userns); Kiln will not run unsandboxed unless started "
             "with --allow-unsandboxed";
    else if (errno == EINVAL)
      hint = "this kernel lacks user namespaces (CONFIG_USER_NS) or the helper runs threaded or chrooted";
    return fail_errno(e, "userns", "unshare(CLONE_NEWUSER)", hint);
  }
  long inner_uid = spec.uid >= 0 ? spec.uid : static_cast<long>(uid);
  long inner_gid = spec.gid >= 0 ? spec.gid : static_cast<long>(gid);
  std::string umap = std::to_string(inner_uid) + " " + std::to_string(uid) + " 1\n";
  std::string gmap = std::to_string(inner_gid) + " " + std::to_string(gid) + " 1\n";
  if (!write_file("/proc/self/setgroups", "deny") && errno != ENOENT)
    return fail_errno(e, "userns", "writing deny to /proc/self/setgroups");
  if (!write_file("/proc/self/uid_map", umap.c_str()))
    return fail_errno(e, "userns", "writing /proc/self/uid_map (" + umap.substr(0, umap.size() - 1) + ")");
  if (!write_file("/proc/self/gid_map", gmap.c_str()))
    return fail_errno(e, "userns", "writing /proc/self/gid_map (" + gmap.substr(0, gmap.size() - 1) + ")");
  return true;
}

bool unshare_namespaces(const Spec& spec, StepError& e) {
  int flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP;
  if (spec.network != Network::host) flags |= CLONE_NEWNET;
  if (::unshare(flags) != 0)
    return fail_errno(e, "namespaces", "unshare(mount, pid, ipc, uts, cgroup" +
                                           std::string(spec.network != Network::host ? ", net)" : ")"),
                      "the kernel refused new namespaces inside the user namespace; a seccomp or LSM policy "
                      "of the calling container may forbid them");
  return true;
}

}  // namespace kiln::helper
