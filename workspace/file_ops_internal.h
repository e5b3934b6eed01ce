// Pieces shared by the file operations (hashing, base64, locating a target, atomic replacement);
// private to workspace/, not part of its interface.
#pragma once

#include <cstdint>
#include <stop_token>
#include <string>
#include <string_view>

#include <sodium.h>
#include <sys/stat.h>

#include "core/error.h"
#include "workspace/root.h"

namespace kiln::workspace::detail {

void ensure_sodium();

class Sha256 {
 public:
  Sha256();
  void update(std::string_view data);
  std::string hex();  // finishes the hash; call once

 private:
  crypto_hash_sha256_state state_;
};

std::string base64_encode(std::string_view bytes);
Result<std::string> base64_decode(std::string_view text);

// True when `expected` (from the client) names the same digest as `actual` (lower-case hex).
bool same_sha256(std::string_view expected, std::string_view actual);

// An entry about to be replaced: its parent directory (beneath the root), its name there and, when
// it exists, what it is. A symlink leaf that stays inside is followed to its target, so writes and
// edits replace the file a link names rather than the link.
struct Target {
  Root::Parent parent;
  bool exists = false;
  struct stat st {};
};
Result<Target> locate_for_write(const Root& root, std::string_view client_path, bool create_dirs);

// Hex SHA-256 of a regular file opened beneath `dirfd` (symlink leaf not followed), streamed up
// to the size it had when opened; too_large above `max` bytes, cancelled once `stop` is requested.
Result<std::string> sha256_file(int dirfd, const std::string& name, std::string_view client_path,
                                std::uint64_t max, std::stop_token stop);

// Reads a whole regular file opened beneath `dirfd` without following a symlink leaf.
Result<std::string> read_whole(int dirfd, const std::string& name, std::string_view client_path, std::size_t max);

// Writes `content` to a fresh temp file beside the target, fsyncs it and renames it over the
// target, so readers see the old or the new file, never a mix. The temp file never outlives a failure.
Result<void> atomic_replace(const Root::Parent& parent, std::string_view content, mode_t mode,
                            std::string_view client_path);

Error errno_error(int err, std::string_view what, std::string_view client_path);

}  // namespace kiln::workspace::detail
