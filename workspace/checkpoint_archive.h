// A checkpoint's files as a tarball anyone can unpack (`kiln checkpoint export`), and a tarball
// unpacked into a new folder without letting any entry reach outside it (`kiln workspace import`).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "workspace/checkpoint_store.h"

namespace kiln::workspace {

struct ArchiveCounts {
  std::uint64_t files = 0, folders = 0, symlinks = 0;
  std::uint64_t bytes = 0;  // file contents
};

struct ExportRequest {
  std::string checkpoint_id;
  std::string output;  // the file to write
  bool zstd = true;    // false: a plain .tar
  bool force = false;  // replace an existing file
};
struct ExportResult {
  ArchiveCounts counts;
  std::uint64_t archive_bytes = 0;  // the file's size
};
// Writes to a temporary file beside `output` and renames it into place at the end, so a failed or
// interrupted export leaves no half archive under the name (and, without force, never replaces one).
Result<ExportResult> export_checkpoint(CheckpointStore& store, const ExportRequest& req);

// Unpacks `archive` (tar or tar.zst, told by its bytes) into `dest`, which must not exist (its
// parent must) or be an empty folder. Refused, naming the entry, and with nothing left behind:
// absolute paths, "..", an entry beneath a symbolic link (the classic tar-slip), the same path
// twice, hard links, devices, FIFOs and other special entries, setuid or setgid files. Folder
// modes are applied last, so a read-only folder's contents can still be written.
Result<ArchiveCounts> unpack_archive(const std::string& archive, const std::string& dest);

}  // namespace kiln::workspace
