// Data folders and their locks. The lock file sits beside the folder, not in it: what is inside
// belongs to the sandbox, which must not be able to fake or remove the lock.
#include "services/data_folder.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <dirent.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "core/open_dir.h"

namespace kiln::services {

const char* to_string(DataUse u) {
  switch (u) {
    case DataUse::development: return "dev";
    case DataUse::verify: return "verify";
    case DataUse::app: return "app";
  }
  return "dev";
}

namespace {

Result<void> make_dir(const std::string& p) {
  if (::mkdir(p.c_str(), 0700) != 0 && errno != EEXIST)
    return fail(Errc::io, fmt::format("cannot create {}: {}", p, std::strerror(errno)));
  return {};
}

}  // namespace

Result<DataFolder> open_data_folder(const std::string& base, const std::string& service, DataUse use, const std::string& target, int wait_ms,
                                    std::stop_token stop) {
  const std::string parent = base.substr(0, base.rfind('/'));
  const std::string svc = base + "/" + service;
  const std::string dir = svc + "/" + to_string(use);
  for (const auto& p : {parent, base, svc, dir})
    if (auto ok = make_dir(p); !ok) return std::unexpected(ok.error());

  DataFolder out;
  const std::string lock_path = svc + "/" + to_string(use) + ".lock";
  out.lock.reset(::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!out.lock) return fail(Errc::io, fmt::format("cannot open {}: {}", lock_path, std::strerror(errno)));
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
  while (::flock(out.lock.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK) return fail(Errc::io, fmt::format("cannot lock {}: {}", lock_path, std::strerror(errno)));
    if (stop.stop_requested())
      return fail(Errc::cancelled, fmt::format("cancelled while waiting for service {}'s data", service));
    if (std::chrono::steady_clock::now() >= deadline)
      return fail(Errc::conflict, fmt::format("service {} of this workspace already runs on its {} data in another "
                                              "sandbox",
                                              service, use == DataUse::verify ? "verify" : use == DataUse::app ? "app" : "development"));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }

  UniqueFd fd(open_dir_no_symlinks(dir.c_str()));
  if (!fd) return fail(Errc::io, fmt::format("cannot open {} without following links: {}", dir, std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISDIR(st.st_mode))
    return fail(Errc::io, fmt::format("{} is not a folder", dir));
  out.path = dir;
  out.bind = sandbox::DataBind{dir, target, std::uint64_t(st.st_dev), std::uint64_t(st.st_ino)};
  return out;
}

namespace {

// A process (not this one) whose cwd is the folder dev/ino, or 0.
pid_t process_working_in(dev_t dev, ino_t ino) {
  DIR* proc = ::opendir("/proc");
  if (!proc) return 0;
  pid_t found = 0;
  while (dirent* e = ::readdir(proc)) {
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (pid <= 0 || *end != '\0' || pid == ::getpid()) continue;
    struct stat st {};
    std::string cwd = std::string("/proc/") + e->d_name + "/cwd";
    if (::stat(cwd.c_str(), &st) == 0 && st.st_dev == dev && st.st_ino == ino) {
      found = pid_t(pid);
      break;
    }
  }
  ::closedir(proc);
  return found;
}

}  // namespace

Result<void> wait_until_unused(const std::string& dir, int wait_ms) {
  UniqueFd fd(open_dir_no_symlinks(dir.c_str()));
  if (!fd) return {};
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return {};
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
  while (pid_t pid = process_working_in(st.st_dev, st.st_ino)) {
    if (std::chrono::steady_clock::now() >= deadline)
      return fail(Errc::conflict, fmt::format("process {} still works in {}: a server of an earlier sandbox is still "
                                              "shutting down; try again in a moment",
                                              pid, dir));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return {};
}

}  // namespace kiln::services
