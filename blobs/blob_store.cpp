// Writing, hashing and placing blobs: small files hashed in memory before anything is written
// (a duplicate costs no write), large ones streamed through a temp file named once hashed.
#include "blobs/blob_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <vector>

#include <fmt/format.h>

#include "core/fd_io.h"
#include "core/owner_tag.h"

namespace kiln::blobs {

namespace {

constexpr std::size_t kInMemoryMax = 1 << 20;
constexpr std::size_t kChunk = 256 * 1024;

std::string to_hex(const unsigned char* p, std::size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string out(n * 2, '0');
  for (std::size_t i = 0; i < n; ++i) {
    out[2 * i] = digits[p[i] >> 4];
    out[2 * i + 1] = digits[p[i] & 15];
  }
  return out;
}

Error too_large(const std::string& shown, std::uint64_t budget) {
  return Error{Errc::too_large, fmt::format("'{}' is larger than the {} bytes left", shown, budget)};
}

// Streams the rest of `fd` through the hash and, when out >= 0, into `out`.
struct Streamed {
  std::string sha;
  std::uint64_t size = 0;
};
Result<Streamed> stream(int fd, int out, std::uint64_t budget, const std::string& shown, const WriteFailure& wf,
                        const std::string& dir) {
  crypto_hash_sha256_state h;
  crypto_hash_sha256_init(&h);
  std::string buf(kChunk, '\0');
  std::uint64_t total = 0;
  for (;;) {
    ssize_t n = read_some(fd, buf.data(), buf.size());
    if (n < 0) return fail(Errc::io, fmt::format("cannot read '{}': {}", shown, std::strerror(errno)));
    if (n == 0) break;
    total += std::uint64_t(n);
    if (total > budget) return std::unexpected(too_large(shown, budget));
    crypto_hash_sha256_update(&h, reinterpret_cast<const unsigned char*>(buf.data()), std::size_t(n));
    if (out >= 0 && !write_all(out, buf.data(), std::size_t(n)))
      return fail(Errc::io, wf ? wf(errno) : fmt::format("cannot write to {}: {}", dir, std::strerror(errno)));
  }
  unsigned char digest[crypto_hash_sha256_BYTES];
  crypto_hash_sha256_final(&h, digest);
  return Streamed{to_hex(digest, sizeof digest), total};
}

}  // namespace

std::string sha256_hex(std::string_view bytes) {
  unsigned char digest[crypto_hash_sha256_BYTES];
  crypto_hash_sha256(digest, reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
  return to_hex(digest, sizeof digest);
}

bool valid_sha256_hex(std::string_view s) {
  if (s.size() != 64) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

Result<BlobStore> BlobStore::open(const std::string& state_dir) {
  for (const char* sub : {"/blobs", "/blobs/sha256", "/blobs/tmp"}) {
    std::string p = state_dir + sub;
    if (::mkdir(p.c_str(), 0700) != 0 && errno != EEXIST)
      return fail(Errc::io, fmt::format("cannot create {}: {}", p, std::strerror(errno)));
  }
  return BlobStore(state_dir);
}

std::string BlobStore::path(std::string_view sha) const {
  return fmt::format("{}/blobs/sha256/{}/{}", dir_, sha.substr(0, 2), sha);
}

bool BlobStore::has(std::string_view sha, std::uint64_t size) const {
  struct stat st {};
  return valid_sha256_hex(sha) && ::stat(path(sha).c_str(), &st) == 0 && std::uint64_t(st.st_size) == size;
}

Result<std::pair<std::string, int>> BlobStore::temp_file(const std::string& shown) const {
  std::string p = dir_ + "/blobs/tmp/blob." + kiln::owner_tag() + ".XXXXXX";
  int fd = ::mkostemp(p.data(), O_CLOEXEC);
  if (fd < 0) return fail(Errc::io, fmt::format("cannot copy '{}' into {}: {}", shown, dir_, std::strerror(errno)));
  return std::pair{p, fd};
}

// Renames the temp file to its content address. An existing blob of the right size is the same
// content (dedup); a short one (a crash before it was synced) is replaced.
Result<bool> BlobStore::place(const std::string& tmp, const std::string& sha, std::uint64_t size) const {
  std::string sub = fmt::format("{}/blobs/sha256/{}", dir_, sha.substr(0, 2));
  if (::mkdir(sub.c_str(), 0700) != 0 && errno != EEXIST) {
    ::unlink(tmp.c_str());
    return fail(Errc::io, fmt::format("cannot create {}: {}", sub, std::strerror(errno)));
  }
  std::string dest = path(sha);
  if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, dest.c_str(), RENAME_NOREPLACE) == 0) return true;
  int err = errno;
  struct stat have {};
  if ((err == EEXIST || err == EINVAL) && ::stat(dest.c_str(), &have) == 0 && std::uint64_t(have.st_size) == size) {
    ::unlink(tmp.c_str());
    return false;
  }
  if (::rename(tmp.c_str(), dest.c_str()) == 0) return true;
  err = errno;
  ::unlink(tmp.c_str());
  return fail(Errc::io, fmt::format("cannot store a blob in {}: {}", sub, std::strerror(err)));
}

Result<Blob> BlobStore::put_bytes(std::string_view data, const WriteFailure& wf) const {
  std::string sha = sha256_hex(data);
  if (has(sha, data.size())) return Blob{sha, data.size(), false};
  auto tmp = temp_file("a blob");
  if (!tmp) return std::unexpected(tmp.error());
  auto& [p, out] = *tmp;
  bool wrote = write_all(out, data.data(), data.size());
  int err = errno;
  if (::close(out) != 0 && wrote) {
    wrote = false;
    err = errno;
  }
  if (!wrote) {
    ::unlink(p.c_str());
    return fail(Errc::io, wf ? wf(err) : fmt::format("cannot write to {}: {}", dir_, std::strerror(err)));
  }
  auto placed = place(p, sha, data.size());
  if (!placed) return std::unexpected(placed.error());
  return Blob{sha, data.size(), *placed};
}

Result<Blob> BlobStore::put(int fd, std::uint64_t budget, const std::string& shown, const WriteFailure& wf) const {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return fail(Errc::io, fmt::format("cannot inspect '{}': {}", shown, std::strerror(errno)));
  if (std::uint64_t(st.st_size) > budget) return std::unexpected(too_large(shown, budget));
  if (std::size_t(st.st_size) <= kInMemoryMax) {
    std::string data(kInMemoryMax + 1, '\0');
    ssize_t full = read_full(fd, data.data(), data.size());
    if (full < 0) return fail(Errc::io, fmt::format("cannot read '{}': {}", shown, std::strerror(errno)));
    if (std::size_t(full) <= kInMemoryMax) {  // else it grew while read: stream it from the start
      data.resize(std::size_t(full));
      if (data.size() > budget) return std::unexpected(too_large(shown, budget));
      return put_bytes(data, wf);
    }
    if (::lseek(fd, 0, SEEK_SET) != 0) return fail(Errc::io, fmt::format("cannot read '{}': {}", shown, std::strerror(errno)));
  }
  auto tmp = temp_file(shown);
  if (!tmp) return std::unexpected(tmp.error());
  auto& [p, out] = *tmp;
  auto s = stream(fd, out, budget, shown, wf, dir_);
  if (!s) {
    ::close(out);
    ::unlink(p.c_str());
    return std::unexpected(s.error());
  }
  if (::close(out) != 0) {
    int err = errno;
    ::unlink(p.c_str());
    return fail(Errc::io, wf ? wf(err) : fmt::format("cannot write to {}: {}", dir_, std::strerror(err)));
  }
  auto placed = place(p, s->sha, s->size);
  if (!placed) return std::unexpected(placed.error());
  return Blob{s->sha, s->size, *placed};
}

Result<Blob> BlobStore::hash(int fd, const std::string& shown) {
  auto s = stream(fd, -1, UINT64_MAX, shown, {}, {});
  if (!s) return std::unexpected(s.error());
  return Blob{s->sha, s->size, false};
}

void BlobStore::remove(std::string_view sha) const {
  if (valid_sha256_hex(sha)) ::unlink(path(sha).c_str());
}

void BlobStore::sync() const {
  int dfd = ::open((dir_ + "/blobs").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::syncfs(dfd);
    ::close(dfd);
  }
}

void BlobStore::reclaim_temp() const {
  const std::string tmp = dir_ + "/blobs/tmp";
  DIR* d = ::opendir(tmp.c_str());
  if (!d) return;
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d))
    if (e->d_name[0] != '.') names.emplace_back(e->d_name);
  ::closedir(d);
  const std::time_t now = std::time(nullptr);
  for (const auto& n : names) {
    const std::string p = tmp + "/" + n;
    struct stat st {};
    auto alive = kiln::tagged_owner_alive(n);
    if (alive ? !*alive : ::lstat(p.c_str(), &st) == 0 && now - st.st_mtime > 3600) ::unlink(p.c_str());
  }
}

Result<BlobLock> BlobStore::lock(int how) const {
  const std::string p = dir_ + "/blobs/refs.lock";
  UniqueFd fd(::open(p.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd) return fail(Errc::io, fmt::format("cannot open {}: {}", p, std::strerror(errno)));
  while (::flock(fd.get(), how) != 0) {
    if (errno == EINTR) continue;
    return fail(Errc::io, fmt::format("cannot lock {}: {}", p, std::strerror(errno)));
  }
  return BlobLock(std::move(fd));
}

Result<BlobLock> BlobStore::lock_shared() const { return lock(LOCK_SH); }
Result<BlobLock> BlobStore::lock_exclusive() const { return lock(LOCK_EX); }

}  // namespace kiln::blobs
