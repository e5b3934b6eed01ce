// A service's data in Kiln's state directory, <base>/<service>/<use>/ (base: <state>/services/<workspace>, or an app's folder), and the
// lock that lets exactly one sandbox run a server on it. Two postmasters on one cluster would
// corrupt it, and in separate pid namespaces postgres's own postmaster.pid check cannot tell.
#pragma once

#include <stop_token>
#include <string>

#include "core/error.h"
#include "core/unique_fd.h"
#include "sandbox/types.h"

namespace kiln::services {

// What a folder is for: the workspace's development data (session sandboxes) or the verify
// template cluster (each verify run clones a fresh database from it).
// An app's data (serve/apps) behaves like development data: one database, set up once, kept.
enum class DataUse { development, verify, app };
const char* to_string(DataUse u);

struct DataFolder {
  std::string path;  // the folder bound into the sandbox (no symlinks on the way)
  sandbox::DataBind bind;
  UniqueFd lock;     // flock held while a sandbox runs the server; released by close (or death)
};

// Creates the folder (0700) and takes its lock. `wait_ms` > 0 waits that long for another holder
// (a verify run behind another), or until `stop`; otherwise a held lock is a conflict error.
// `base` holds a folder per service: <state>/services/<workspace> for a workspace's services,
// <state>/apps/<artifact>/services for an app's.
Result<DataFolder> open_data_folder(const std::string& base, const std::string& service, DataUse use, const std::string& target, int wait_ms,
                                    std::stop_token stop = {});

// Waits (up to `wait_ms`) until no process on the host has its working directory in `dir`: every
// postgres process works in its data directory, so this sees a postmaster of a sandbox that is
// still being torn down (after a kill -9 of the server that held the lock) in any namespace. A
// missing `dir` is unused.
Result<void> wait_until_unused(const std::string& dir, int wait_ms);

}  // namespace kiln::services
