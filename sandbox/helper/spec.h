// The sandbox spec kiln writes to the spec fd (HELPER_PROTOCOL.md, "Spec"), parsed strictly: an
// unknown field or a wrong type is refused, since a typo must not quietly weaken the isolation.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sandbox/helper/step_error.h"

namespace kiln::helper {

enum class Network { none, loopback, host };

// A folder of kiln's state bound read-write inside (a service's data, e.g. a Postgres cluster).
// Like the workspace it is opened without following symlinks and must be the folder kiln checked.
struct DataBind {
  std::string source;  // clean absolute host path
  std::string target;  // clean absolute path inside
  std::uint64_t dev = 0, ino = 0;
};

struct Spec {
  std::string id;
  std::string workspace;  // a clean absolute path without symlinks (kiln resolved it)
  // The folder kiln checked (st_dev, st_ino): the mount is made from a descriptor opened without
  // following any symlink and must be that very folder, so a swap in between is refused.
  std::uint64_t workspace_dev = 0, workspace_ino = 0;
  bool workspace_identity = false;
  bool workspace_writable = true;
  std::vector<std::string> ro_binds;
  std::vector<DataBind> data_binds;
  Network network = Network::none;
  std::string hostname = "kiln";
  unsigned tmp_size_mb = 512;
  long uid = -1;  // ids inside the sandbox; -1 means "the caller's own"
  long gid = -1;
  std::vector<std::string> cgroups;
  bool seccomp = true;
  bool landlock = true;
  // Kiln runs one exec here and destroys the sandbox (a fresh sandbox): pid 1 keeps no spare
  // shepherd after it. Only spares CPU; a second exec would still run, forked as it comes.
  bool single_exec = false;
};

bool parse_spec(const std::string& text, Spec& spec, StepError& e);
const char* network_name(Network n);
// Absolute, no "..", "." or empty components, no NUL: the only paths the helper will mount.
bool is_clean_abs_path(const std::string& p);

}  // namespace kiln::helper
