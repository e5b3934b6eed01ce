// The secret store: one 0600 file per name, never logged, never echoed.
#include "sandbox/secrets.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "core/fd_io.h"

namespace kiln::sandbox {

bool valid_secret_name(const std::string& name) {
  if (name.empty() || name.size() > 128) return false;
  if (!(std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_')) return false;
  for (char c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  return true;
}

Result<void> SecretStore::set(const std::string& name, const std::string& value) const {
  if (!valid_secret_name(name))
    return fail(Errc::invalid_argument, fmt::format("'{}' is not a valid secret name: use letters, digits and '_'", name));
  if (::mkdir(dir_.c_str(), 0700) != 0 && errno != EEXIST)
    return fail(Errc::io, fmt::format("cannot create {}: {}", dir_, std::strerror(errno)));
  ::chmod(dir_.c_str(), 0700);
  std::string tmp = fmt::format("{}/.{}.tmp{}", dir_, name, ::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return fail(Errc::io, fmt::format("cannot write {}: {}", tmp, std::strerror(errno)));
  if (!write_all(fd, value)) {
    int err = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    return fail(Errc::io, fmt::format("cannot write secret {}: {}", name, std::strerror(err)));
  }
  ::fchmod(fd, 0600);
  ::fsync(fd);
  ::close(fd);
  std::string final_path = dir_ + "/" + name;
  if (::rename(tmp.c_str(), final_path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return fail(Errc::io, fmt::format("cannot store secret {}: {}", name, std::strerror(err)));
  }
  return {};
}

Result<bool> SecretStore::remove(const std::string& name) const {
  if (!valid_secret_name(name)) return fail(Errc::invalid_argument, fmt::format("'{}' is not a valid secret name", name));
  std::string p = dir_ + "/" + name;
  if (::unlink(p.c_str()) == 0) return true;
  if (errno == ENOENT) return false;
  return fail(Errc::io, fmt::format("cannot remove secret {}: {}", name, std::strerror(errno)));
}

std::vector<std::string> SecretStore::names() const {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir_.c_str());
  if (!d) return out;
  while (auto* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (valid_secret_name(n)) out.push_back(n);
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

Result<std::map<std::string, std::string>> SecretStore::resolve(const std::vector<std::string>& names) const {
  std::map<std::string, std::string> out;
  for (const auto& name : names) {
    if (!valid_secret_name(name))
      return fail(Errc::invalid_argument, fmt::format("'{}' is not a valid secret name: use letters, digits and '_'", name));
    if (const char* v = std::getenv(name.c_str()); v && *v) {
      out[name] = v;
      continue;
    }
    std::string p = dir_ + "/" + name;
    int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
      return fail(Errc::not_found,
                  fmt::format("secret {} is not set: export {} in the environment that starts kiln, or run "
                              "`kiln secret set {}` (reads the value from stdin)",
                              name, name, name));
    }
    std::string value;
    bool read_ok = read_all(fd, value, value.max_size());
    int err = errno;
    ::close(fd);
    if (!read_ok) return fail(Errc::io, fmt::format("cannot read secret {}: {}", name, std::strerror(err)));
    if (value.empty()) return fail(Errc::invalid_argument, fmt::format("secret {} is empty: set it again", name));
    out[name] = std::move(value);
  }
  return out;
}

}  // namespace kiln::sandbox
