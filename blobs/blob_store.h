// File contents by their SHA-256, at <state>/blobs/sha256/<aa>/<hex>, stored once however many
// artifact versions and checkpoints hold them. The store keeps no references: each owner does, and
// deletes a blob only under the exclusive lock, after asking every other owner (BlobReferrers).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "core/error.h"
#include "core/unique_fd.h"

namespace kiln::blobs {

struct Blob {
  std::string sha256;  // lower-case hex
  std::uint64_t size = 0;
  bool is_new = false;  // this call wrote it (false: the content was there already)
};

// What a failed write says; `err` is the errno (ENOSPC: the caller names what to free).
using WriteFailure = std::function<std::string(int err)>;

std::string sha256_hex(std::string_view bytes);
bool valid_sha256_hex(std::string_view s);

// flock(2) on <state>/blobs/refs.lock. Writers hold it shared from the moment they rely on a blob
// (wrote it or found it there) until the row that references it is committed; deleting a blob
// takes it exclusive, so a collection never removes what a commit in flight is about to point at.
// One open file description per hold, so threads of one process exclude each other too.
class BlobLock {
 public:
  BlobLock() = default;
  bool held() const { return fd_.get() >= 0; }
 private:
  friend class BlobStore;
  explicit BlobLock(UniqueFd fd) : fd_(std::move(fd)) {}
  UniqueFd fd_;  // closing it releases the lock
};

class BlobStore {
 public:
  // Makes <state_dir>/blobs/{sha256,tmp} (0700) when missing.
  static Result<BlobStore> open(const std::string& state_dir);
  // For an owner that made those folders itself.
  explicit BlobStore(std::string state_dir) : dir_(std::move(state_dir)) {}

  const std::string& dir() const { return dir_; }  // the state directory
  std::string path(std::string_view sha256) const;
  bool has(std::string_view sha256, std::uint64_t size) const;  // present with that size

  // Copies an open file in (`shown` names it in errors). More than `budget` bytes is
  // Errc::too_large; a write failure is Errc::io with write_failure(errno).
  Result<Blob> put(int fd, std::uint64_t budget, const std::string& shown, const WriteFailure& write_failure) const;
  Result<Blob> put_bytes(std::string_view bytes, const WriteFailure& write_failure) const;
  // Hashes without storing (a diff against the files now).
  static Result<Blob> hash(int fd, const std::string& shown);

  // Removes a blob. Only under lock_exclusive(), after every owner said it is unreferenced.
  void remove(std::string_view sha256) const;
  // One flush for many new blobs before the row that makes them reachable is committed.
  void sync() const;
  // Temp copies left by dead writers (tagged with their pid); untagged ones an hour old.
  void reclaim_temp() const;

  Result<BlobLock> lock_shared() const;
  Result<BlobLock> lock_exclusive() const;

 private:
  Result<std::pair<std::string, int>> temp_file(const std::string& shown) const;
  Result<bool> place(const std::string& tmp, const std::string& sha, std::uint64_t size) const;
  Result<BlobLock> lock(int how) const;
  std::string dir_;
};

}  // namespace kiln::blobs
