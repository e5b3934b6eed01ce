// The one EINTR-safe read/write loop of every layer, the kiln-sandbox helper included (no
// allocation except read_all's string, so the rest is usable between fork and exec).
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <string>
#include <string_view>

namespace kiln {

// One read(2), retried on EINTR: bytes read (0 at EOF), or -1 with errno (EAGAIN included, for
// callers that poll).
inline ssize_t read_some(int fd, void* buf, std::size_t len) {
  for (;;) {
    ssize_t n = ::read(fd, buf, len);
    if (n >= 0 || errno != EINTR) return n;
  }
}

inline ssize_t pread_some(int fd, void* buf, std::size_t len, off_t off) {
  for (;;) {
    ssize_t n = ::pread(fd, buf, len, off);
    if (n >= 0 || errno != EINTR) return n;
  }
}

// One write(2), retried on EINTR: bytes written, or -1 with errno (EAGAIN included).
inline ssize_t write_some(int fd, const void* data, std::size_t len) {
  for (;;) {
    ssize_t n = ::write(fd, data, len);
    if (n >= 0 || errno != EINTR) return n;
  }
}

// Reads until `len` bytes or EOF: the bytes read (fewer only at EOF), or -1 with errno.
inline ssize_t read_full(int fd, void* buf, std::size_t len) {
  char* p = static_cast<char*>(buf);
  std::size_t got = 0;
  while (got < len) {
    ssize_t n = read_some(fd, p + got, len - got);
    if (n < 0) return -1;
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  return static_cast<ssize_t>(got);
}

// read_full at an offset (pread: the file position is left alone).
inline ssize_t pread_full(int fd, void* buf, std::size_t len, off_t off) {
  char* p = static_cast<char*>(buf);
  std::size_t got = 0;
  while (got < len) {
    ssize_t n = pread_some(fd, p + got, len - got, off + static_cast<off_t>(got));
    if (n < 0) return -1;
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  return static_cast<ssize_t>(got);
}

// Writes all `len` bytes: false with errno when a write fails (a write that takes nothing is EIO).
inline bool write_all(int fd, const void* data, std::size_t len) {
  const char* p = static_cast<const char*>(data);
  while (len > 0) {
    ssize_t n = write_some(fd, p, len);
    if (n < 0) return false;
    if (n == 0) {
      errno = EIO;
      return false;
    }
    p += n;
    len -= static_cast<std::size_t>(n);
  }
  return true;
}

inline bool write_all(int fd, std::string_view s) { return write_all(fd, s.data(), s.size()); }

// pwrite of all `len` bytes at `off`; false with errno as write_all.
inline bool pwrite_all(int fd, const void* data, std::size_t len, off_t off) {
  const char* p = static_cast<const char*>(data);
  while (len > 0) {
    ssize_t n = ::pwrite(fd, p, len, off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = EIO;
      return false;
    }
    p += n;
    off += static_cast<off_t>(n);
    len -= static_cast<std::size_t>(n);
  }
  return true;
}

// Appends everything up to EOF to `out`: false with errno on a read error, or with EFBIG once
// more than `limit` bytes arrived in all (what came is kept).
inline bool read_all(int fd, std::string& out, std::size_t limit) {
  char buf[8192];
  std::size_t taken = 0;
  for (;;) {
    ssize_t n = read_some(fd, buf, sizeof buf);
    if (n < 0) return false;
    if (n == 0) return true;
    if (taken + static_cast<std::size_t>(n) > limit) {
      errno = EFBIG;
      return false;
    }
    taken += static_cast<std::size_t>(n);
    out.append(buf, static_cast<std::size_t>(n));
  }
}

}  // namespace kiln
