// Making, keeping and reading the default MCP bearer token (see token.h).
#include "mcp/http/token.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>
#include <sodium.h>

namespace kiln::server {
namespace {

Result<std::string> read_token(int fd, const std::string& path) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return fail(Errc::io, fmt::format("{}: {}", path, std::strerror(errno)));
  if (!S_ISREG(st.st_mode) || st.st_uid != ::geteuid()) {
    return fail(Errc::io, fmt::format("{} is not a file of this user's; remove it and start again (a new token is made)", path));
  }
  if ((st.st_mode & 077) != 0) {
    return fail(Errc::io, fmt::format("{} is open to other users (mode {:o}): the token may be known; remove the file "
                                      "(a new token is made at the next start) and update your clients",
                                      path, st.st_mode & 0777));
  }
  char buf[256];
  ssize_t n = ::read(fd, buf, sizeof buf);
  if (n < 0) return fail(Errc::io, fmt::format("{}: {}", path, std::strerror(errno)));
  std::string token(buf, static_cast<std::size_t>(n));
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r' || token.back() == ' ')) token.pop_back();
  if (token.size() < 32) return fail(Errc::io, fmt::format("{} holds no token; remove it and start again", path));
  return token;
}

}  // namespace

std::string default_token_path(const std::string& state_dir) { return state_dir + "/mcp-token"; }

Result<std::string> ensure_default_token(const std::string& state_dir) {
  if (sodium_init() < 0) return fail(Errc::internal, "libsodium could not be initialised");
  const std::string path = default_token_path(state_dir);
  for (int attempt = 0; attempt < 3; ++attempt) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd >= 0) {
      auto token = read_token(fd, path);
      ::close(fd);
      return token;
    }
    if (errno != ENOENT) return fail(Errc::io, fmt::format("{}: {}", path, std::strerror(errno)));
    // Written under a temporary name and linked in place: a second server starting at the same
    // time either wins the link or reads the winner's whole token, never a half-written one.
    unsigned char raw[32];
    randombytes_buf(raw, sizeof raw);
    char hex[sizeof raw * 2 + 1];
    sodium_bin2hex(hex, sizeof hex, raw, sizeof raw);
    sodium_memzero(raw, sizeof raw);
    std::string tmp = fmt::format("{}.{}.tmp", path, ::getpid());
    int out = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (out < 0) return fail(Errc::io, fmt::format("cannot write {}: {}", tmp, std::strerror(errno)));
    std::string line = std::string(hex) + "\n";
    bool wrote = ::fchmod(out, 0600) == 0 && ::write(out, line.data(), line.size()) == ssize_t(line.size()) &&
                 ::fsync(out) == 0;
    ::close(out);
    if (!wrote) {
      ::unlink(tmp.c_str());
      return fail(Errc::io, fmt::format("cannot write {}: {}", tmp, std::strerror(errno)));
    }
    int linked = ::link(tmp.c_str(), path.c_str());
    int link_errno = errno;
    ::unlink(tmp.c_str());
    if (linked == 0) return std::string(hex);
    if (link_errno != EEXIST) return fail(Errc::io, fmt::format("cannot create {}: {}", path, std::strerror(link_errno)));
  }
  return fail(Errc::io, fmt::format("{} keeps changing; is another server replacing it?", path));
}

}  // namespace kiln::server
