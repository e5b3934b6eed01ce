// The bytes of an archive file on disk: written plain or through zstd, read back with the
// compression told by the file's first bytes (not its name), so a renamed .tar.zst still opens.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "core/error.h"
#include "core/unique_fd.h"

namespace kiln::workspace {

class ArchiveOutput {
 public:
  // Writes to `fd` (kept open by the caller), compressed with zstd at `level` when `zstd`.
  static Result<std::unique_ptr<ArchiveOutput>> open(int fd, bool zstd, int level = 3);
  virtual ~ArchiveOutput() = default;
  virtual Result<void> write(std::string_view data) = 0;
  // Flushes the last frame; the file is complete after this.
  virtual Result<void> finish() = 0;
};

class ArchiveInput {
 public:
  // Reads `fd` (owned from here on): zstd frames are decompressed, anything else passed through.
  static Result<std::unique_ptr<ArchiveInput>> open(UniqueFd fd, const std::string& shown);
  virtual ~ArchiveInput() = default;
  // Up to `n` bytes; 0 at the end.
  virtual Result<std::size_t> read(char* buf, std::size_t n) = 0;
  virtual bool compressed() const = 0;
};

}  // namespace kiln::workspace
