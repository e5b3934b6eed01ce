// The file operations behind the file_* tools, as plain C++: read in pages, write atomically,
// edit by exact replacement, move and delete, all confined to a workspace Root.
#pragma once

#include <cstdint>
#include <optional>
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

struct ReadRequest {
  std::string path;
  std::uint64_t offset = 0;  // text: 0-based line index; base64: byte offset
  std::optional<std::uint64_t> limit;  // text: lines (default 2000); base64: bytes (default and max 256 KiB)
  Encoding encoding = Encoding::text;
};

struct ReadResult {
  std::string path;  // normalised relative path
  std::string content;
  Encoding encoding = Encoding::text;
  std::uint64_t offset = 0;  // where this page starts (line or byte, as requested)
  std::uint64_t count = 0;   // lines (text) or bytes (base64) in this page
  std::uint64_t total_lines = 0;
  bool truncated = false;                    // more remains after this page
  std::optional<std::uint64_t> next_offset;  // pass as offset to read on; absent at the end
  std::string sha256;                        // hex, of the whole file
  std::uint64_t size = 0;                    // bytes in the whole file
  std::string note;  // set when a single line was longer than a page and had to be cut
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

Result<ReadResult> read_file(const Root& root, const ReadRequest& req);
Result<WriteResult> write_file(const Root& root, const WriteRequest& req);
Result<EditResult> edit_file(const Root& root, const EditRequest& req);
Result<MoveResult> move_path(const Root& root, const MoveRequest& req);
Result<DeleteResult> delete_path(const Root& root, const DeleteRequest& req);

// Lower-case hex SHA-256, the form every result reports and if_sha256 expects.
std::string sha256_hex(std::string_view data);

}  // namespace kiln::workspace
