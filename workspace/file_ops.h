// The file operations behind the file_* tools, as plain C++: read in pages, write atomically,
// edit by exact replacement, move and delete, all confined to a workspace Root.
#pragma once

#include <cstdint>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "workspace/root.h"

namespace kiln::workspace {

enum class Encoding { text, base64 };

inline constexpr std::size_t kMaxPageBytes = 256 * 1024;  // keeps one result well under 1 MiB
inline constexpr std::uint64_t kDefaultReadLines = 2000;
inline constexpr std::size_t kMaxEditBytes = 32 * 1024 * 1024;
// Files up to this size are read whole on every file_read (sha256, total_lines, UTF-8 check of
// everything); bigger ones only as far as the page needs, so one call's work stays bounded
// whatever the file's size (a 10 GB sparse file is created in a millisecond).
inline constexpr std::uint64_t kWholeFileBytes = 64ull << 20;
// How far a text read of a bigger file scans from the start to find its first line.
inline constexpr std::uint64_t kTextScanBudget = 64ull << 20;

struct ReadRequest {
  std::string path;
  std::uint64_t offset = 0;  // text: 0-based line index; base64: byte offset
  std::optional<std::uint64_t> limit;  // text: lines (default 2000); base64: bytes (default and max 256 KiB)
  Encoding encoding = Encoding::text;
  std::uint64_t whole_file_bytes = kWholeFileBytes;  // tests use small ones
  std::uint64_t scan_budget = kTextScanBudget;
};

struct ReadResult {
  std::string path;  // normalised relative path
  std::string content;
  Encoding encoding = Encoding::text;
  std::uint64_t offset = 0;  // where this page starts (line or byte, as requested)
  std::uint64_t count = 0;   // lines (text) or bytes (base64) in this page
  // Known when the whole file was read (files up to whole_file_bytes, or a text scan that
  // reached the end); absent for a page of a bigger file.
  std::optional<std::uint64_t> total_lines;
  bool truncated = false;                    // more remains after this page, or a line was cut
  std::optional<std::uint64_t> next_offset;  // pass as offset to read on; absent at the end
  std::optional<std::string> sha256;         // hex, of the whole file; files up to whole_file_bytes
  std::uint64_t size = 0;                    // bytes in the file when it was opened (never read past)
  std::string note;  // a line longer than a page was cut, or the file is too big to read whole
};

struct WriteRequest {
  std::string path;
  std::string content;
  Encoding encoding = Encoding::text;
  std::optional<std::string> if_sha256;
  bool create_dirs = false;
};

struct WriteResult {
  std::string path;
  std::uint64_t size = 0;
  std::string sha256;
  bool created = false;
};

struct Edit {
  std::string old_text;
  std::string new_text;
  bool replace_all = false;
};

struct EditRequest {
  std::string path;
  std::vector<Edit> edits;
  bool dry_run = false;
  std::optional<std::string> if_sha256;
};

struct EditResult {
  std::string path;
  std::string diff;    // unified, "--- a/path" / "+++ b/path", 3 lines of context; "" when unchanged
  std::string sha256;  // of the content after the edits (what is, or on dry_run would be, on disk)
  std::uint64_t replacements = 0;
  bool applied = false;  // false on dry_run
};

struct MoveRequest {
  std::string from;
  std::string to;
  bool overwrite = false;
};

struct MoveResult {
  std::string from;
  std::string to;
};

struct DeleteRequest {
  std::string path;
  bool recursive = false;
};

struct DeleteResult {
  std::string path;
  std::uint64_t deleted = 0;  // entries removed, the path itself included
};

// `stop` (the request's cancellation) is checked between chunks: a cancelled call returns
// Errc::cancelled instead of finishing its pass over the file.
Result<ReadResult> read_file(const Root& root, const ReadRequest& req, std::stop_token stop = {});
Result<WriteResult> write_file(const Root& root, const WriteRequest& req, std::stop_token stop = {});
Result<EditResult> edit_file(const Root& root, const EditRequest& req);  // bounded by kMaxEditBytes
Result<MoveResult> move_path(const Root& root, const MoveRequest& req);
Result<DeleteResult> delete_path(const Root& root, const DeleteRequest& req);

// Lower-case hex SHA-256, the form every result reports and if_sha256 expects.
std::string sha256_hex(std::string_view data);

}  // namespace kiln::workspace
