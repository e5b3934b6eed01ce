// Shared plumbing of the file operations: SHA-256 and base64 through libsodium, finding the entry a
// write replaces, and the temp-file-then-rename replacement every write and edit goes through.
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include "core/fd_io.h"
#include "workspace/file_ops.h"
#include "workspace/file_ops_internal.h"

namespace kiln::workspace {

namespace detail {

void ensure_sodium() {
  static std::once_flag once;
  std::call_once(once, [] {
    // Only fails without an entropy source, which libsodium reports by aborting on first use of
    // randombytes anyway; hashing and base64 need no initialisation of their own.
    [[maybe_unused]] int rc = sodium_init();
  });
}

Sha256::Sha256() {
  ensure_sodium();
  crypto_hash_sha256_init(&state_);
}

void Sha256::update(std::string_view data) {
  crypto_hash_sha256_update(&state_, reinterpret_cast<const unsigned char*>(data.data()), data.size());
}

std::string Sha256::hex() {
  unsigned char out[crypto_hash_sha256_BYTES];
  crypto_hash_sha256_final(&state_, out);
  char hex[crypto_hash_sha256_BYTES * 2 + 1];
  sodium_bin2hex(hex, sizeof hex, out, sizeof out);
  return std::string(hex, crypto_hash_sha256_BYTES * 2);
}

std::string base64_encode(std::string_view bytes) {
  ensure_sodium();
  const int variant = sodium_base64_VARIANT_ORIGINAL;
  std::string out(sodium_base64_ENCODED_LEN(bytes.size(), variant), '\0');
  sodium_bin2base64(out.data(), out.size(), reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(),
                    variant);
  out.resize(std::strlen(out.c_str()));
  return out;
}

Result<std::string> base64_decode(std::string_view text) {
  ensure_sodium();
  std::string out(text.size() / 4 * 3 + 3, '\0');
  size_t len = 0;
  const char* end = nullptr;
  // Whitespace is ignored so wrapped base64 (as some encoders emit) is accepted.
  int rc = sodium_base642bin(reinterpret_cast<unsigned char*>(out.data()), out.size(), text.data(), text.size(),
                             " \t\r\n", &len, &end, sodium_base64_VARIANT_ORIGINAL);
  if (rc != 0 || (end && end != text.data() + text.size())) {
    size_t at = end ? static_cast<size_t>(end - text.data()) : 0;
    return fail(Errc::invalid_argument,
                fmt::format("content is not valid base64 (standard alphabet with padding; problem near character {})",
                            at));
  }
  out.resize(len);
  return out;
}

bool same_sha256(std::string_view expected, std::string_view actual) {
  if (expected.size() != actual.size()) return false;
  for (size_t i = 0; i < expected.size(); ++i) {
    char c = expected[i];
    if (c >= 'A' && c <= 'F') c = static_cast<char>(c - 'A' + 'a');
    if (c != actual[i]) return false;
  }
  return true;
}

Error errno_error(int err, std::string_view what, std::string_view client_path) {
  switch (err) {
    case ENOENT:
      return {Errc::not_found, fmt::format("'{}' does not exist", client_path)};
    case ENOSPC:
    case EDQUOT:
      return {Errc::io, fmt::format("cannot {} '{}': the disk is full", what, client_path)};
    case EROFS:
      return {Errc::io, fmt::format("cannot {} '{}': the file system is read-only", what, client_path)};
    case EACCES:
    case EPERM:
      return {Errc::io, fmt::format("cannot {} '{}': permission denied", what, client_path)};
    case EFBIG:
      return {Errc::too_large, fmt::format("cannot {} '{}': the file is too large", what, client_path)};
    default:
      return {Errc::io, fmt::format("cannot {} '{}': {}", what, client_path, std::strerror(err))};
  }
}

Result<Target> locate_for_write(const Root& root, std::string_view client_path, bool create_dirs) {
  auto parent = root.open_parent(client_path, create_dirs);
  if (!parent) {
    Error e = parent.error();
    if (e.code == Errc::not_found && !create_dirs && e.message.starts_with("folder '"))
      e.message += "; pass create_dirs: true to create missing folders";
    return std::unexpected(std::move(e));
  }
  Target t;
  t.parent = std::move(*parent);
  for (int hop = 0; hop < 2; ++hop) {
    if (::fstatat(t.parent.dir.get(), t.parent.name.c_str(), &t.st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno != ENOENT) return std::unexpected(errno_error(errno, "inspect", client_path));
      t.exists = false;
      return t;
    }
    t.exists = true;
    if (!S_ISLNK(t.st.st_mode)) break;
    if (hop == 1) {
      return fail(Errc::conflict, fmt::format("'{}' keeps changing (a symbolic link was replaced); try again",
                                              client_path));
    }
    auto real = root.resolve(client_path);
    if (!real) {
      Error e = real.error();
      if (e.code == Errc::not_found)
        e.message = fmt::format("'{}' is a symbolic link to a file that does not exist; write to the target path "
                                "itself, or delete the link first",
                                client_path);
      return std::unexpected(std::move(e));
    }
    auto target_parent = root.open_parent(*real, false);
    if (!target_parent) return std::unexpected(target_parent.error());
    t.parent = std::move(*target_parent);
  }
  if (S_ISDIR(t.st.st_mode)) {
    return fail(Errc::invalid_argument,
                fmt::format("'{}' is a folder; name a file inside it (file_list shows what is there)", client_path));
  }
  if (!S_ISREG(t.st.st_mode)) {
    return fail(Errc::invalid_argument,
                fmt::format("'{}' is not a regular file (a device, pipe or socket); only regular files can be written",
                            client_path));
  }
  return t;
}

namespace {

Result<UniqueFd> open_regular(int dirfd, const std::string& name, std::string_view client_path, struct stat& st) {
  int fd = ::openat(dirfd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) return std::unexpected(errno_error(errno, "open", client_path));
  UniqueFd owned(fd);
  if (::fstat(fd, &st) != 0) return std::unexpected(errno_error(errno, "inspect", client_path));
  if (!S_ISREG(st.st_mode)) return fail(Errc::invalid_argument, fmt::format("'{}' is not a regular file", client_path));
  return owned;
}

// Calls `sink` with each chunk of the file's first `limit` bytes (its size when opened, so a file
// that keeps growing cannot keep the caller reading); stops at the first error.
template <class Sink>
Result<void> read_chunks(int fd, std::string_view client_path, std::uint64_t limit, Sink&& sink) {
  char buf[65536];
  std::uint64_t done = 0;
  while (done < limit) {
    ssize_t n = read_some(fd, buf, static_cast<size_t>(std::min<std::uint64_t>(sizeof buf, limit - done)));
    if (n < 0) return std::unexpected(errno_error(errno, "read", client_path));
    if (n == 0) return {};
    done += static_cast<std::uint64_t>(n);
    if (auto r = sink(std::string_view(buf, static_cast<size_t>(n))); !r) return r;
  }
  return {};
}

}  // namespace

Result<std::string> sha256_file(int dirfd, const std::string& name, std::string_view client_path,
                                std::uint64_t max, std::stop_token stop) {
  struct stat st {};
  auto fd = open_regular(dirfd, name, client_path, st);
  if (!fd) return std::unexpected(fd.error());
  const auto size = static_cast<std::uint64_t>(st.st_size);
  if (size > max) {
    return fail(Errc::too_large,
                fmt::format("'{}' is {} bytes, more than the {} up to which file_read reports a sha256, so if_sha256 "
                            "cannot be checked; write without if_sha256 to replace it",
                            client_path, size, max));
  }
  Sha256 h;
  auto r = read_chunks(fd->get(), client_path, size, [&](std::string_view c) -> Result<void> {
    if (stop.stop_requested()) return fail(Errc::cancelled, fmt::format("hashing '{}' was cancelled", client_path));
    h.update(c);
    return {};
  });
  if (!r) return std::unexpected(r.error());
  return h.hex();
}

Result<std::string> read_whole(int dirfd, const std::string& name, std::string_view client_path, std::size_t max) {
  struct stat st {};
  auto fd = open_regular(dirfd, name, client_path, st);
  if (!fd) return std::unexpected(fd.error());
  if (static_cast<std::uint64_t>(st.st_size) > max) {
    return fail(Errc::too_large, fmt::format("'{}' is {} bytes, more than the {} bytes this operation handles; use "
                                             "file_write to replace it whole",
                                             client_path, st.st_size, max));
  }
  std::string out;
  out.reserve(static_cast<size_t>(st.st_size));
  auto r = read_chunks(fd->get(), client_path, static_cast<std::uint64_t>(st.st_size), [&](std::string_view c) -> Result<void> {
    out.append(c);
    return {};
  });
  if (!r) return std::unexpected(r.error());
  return out;
}

Result<void> atomic_replace(const Root::Parent& parent, std::string_view content, mode_t mode,
                            std::string_view client_path) {
  ensure_sodium();
  int dir = parent.dir.get();
  std::string tmp;
  int fd = -1;
  for (int attempt = 0; attempt < 16 && fd < 0; ++attempt) {
    unsigned char rnd[8];
    randombytes_buf(rnd, sizeof rnd);
    char hex[sizeof rnd * 2 + 1];
    sodium_bin2hex(hex, sizeof hex, rnd, sizeof rnd);
    tmp = fmt::format(".kiln-write-{}.tmp", hex);
    fd = ::openat(dir, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0 && errno != EEXIST) return std::unexpected(errno_error(errno, "write", client_path));
  }
  if (fd < 0) return fail(Errc::io, fmt::format("cannot write '{}': no free temporary name", client_path));
  UniqueFd owned(fd);
  auto abandon = [&](int err, std::string_view what) {
    owned = UniqueFd();
    ::unlinkat(dir, tmp.c_str(), 0);
    return std::unexpected(errno_error(err, what, client_path));
  };
  if (::fchmod(fd, mode & 07777) != 0) return abandon(errno, "set the mode of");
  if (!write_all(fd, content)) return abandon(errno, "write");
  if (::fsync(fd) != 0) return abandon(errno, "write");
  if (::close(owned.release()) != 0) return abandon(errno, "write");
  if (::renameat(dir, tmp.c_str(), dir, parent.name.c_str()) != 0) return abandon(errno, "replace");
  ::fsync(dir);  // makes the rename durable; a failure here loses nothing already visible
  return {};
}

}  // namespace detail

std::string sha256_hex(std::string_view data) {
  detail::Sha256 h;
  h.update(data);
  return h.hex();
}

}  // namespace kiln::workspace
