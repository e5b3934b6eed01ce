// From what the caller and kiln.json ask for to what the helper gets: limits with defaults, the
// filtered environment, and the helper's JSON spec (which host folders are visible, read-only).
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "sandbox/types.h"

namespace kiln::sandbox {

// The PATH every sandboxed command gets (the host's PATH never leaks in).
inline constexpr const char* kSafePath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
inline constexpr const char* kSandboxHome = "/tmp/home";

struct PolicyInput {
  nlohmann::json config_sandbox = nlohmann::json::object();  // kiln.json "sandbox" section
  nlohmann::json args = nlohmann::json::object();            // network, limits, env, secrets, isolation
  std::string workspace_root;
  std::string workspace_id;
};

// Merges kiln.json defaults with the call's arguments (the call wins, per limit and per env
// variable; secrets are the union). A malformed value is an invalid_argument naming it.
Result<SandboxPolicy> make_policy(const PolicyInput& in);

// Fills unset limits with Kiln's defaults: wall_s 600, output_bytes 64 MiB, file_size_mb 1024,
// and where cgroups enforce them memory_mb 2048 and pids 1024.
void apply_default_limits(Limits& l, bool have_cgroup_memory, bool have_cgroup_pids);

// Host paths bound read-only into every sandbox: system folders and the /etc files a toolchain
// needs. Never /etc as a whole, never a home folder.
const std::vector<std::string>& default_ro_binds();

// The sandbox environment: PATH, HOME, LANG, TERM, then policy.env, then secrets. Nothing else
// from the host.
std::map<std::string, std::string> sandbox_env(const SandboxPolicy& p,
                                               const std::map<std::string, std::string>& secret_values);
std::vector<std::string> env_strings(const std::map<std::string, std::string>& env);

// Refuses workspaces that would expose what the sandbox must hide: "/", a folder holding Kiln's
// state dir, or a home folder (or its parent) of the user running Kiln.
Result<void> check_workspace_root(const std::string& root, const std::string& state_dir);

// The spec written to kiln-sandbox (HELPER_PROTOCOL.md, "Spec").
// The ids inside a sandbox that hosts services when Kiln runs as root: nobody/nogroup, present in
// every Debian /etc/passwd (initdb looks its user up). Still the host's root outside.
inline constexpr long kServiceIdForRoot = 65534;

nlohmann::json helper_spec(const SandboxPolicy& p, const std::string& id, const std::vector<std::string>& cgroup_dirs);

// The workspace folder as the helper must find it (st_dev, st_ino), opened without following any
// symlink: the helper mounts only that folder, so a folder swapped in after the checks is refused.
struct FolderIdentity {
  std::uint64_t dev = 0, ino = 0;
};
Result<FolderIdentity> workspace_identity(const std::string& root);

Result<Network> parse_network(const std::string& s);

}  // namespace kiln::sandbox
