// POSIX tar (ustar with pax extended headers) written and read as a stream, for checkpoint export
// and workspace import. Hand-written because the library that does it (libarchive) links a dozen
// shared libraries and the dynamic C++ runtime into a binary that keeps its start-up cheap.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "core/error.h"

namespace kiln::workspace {

enum class TarType { file, dir, symlink, hardlink, char_device, block_device, fifo, other };
std::string_view to_string(TarType t);

struct TarHeader {
  std::string path;          // as stored (the writer adds a trailing '/' to folders itself)
  TarType type = TarType::file;
  std::uint32_t mode = 0;    // permission bits and setuid/setgid/sticky (07777)
  std::uint64_t size = 0;    // a file's bytes (0 for the rest)
  std::string link_target;   // symlink or hard link target
  std::int64_t mtime = 0;    // seconds since the epoch
  char typeflag = '0';       // reader: the flag as found (for errors about unknown kinds)
};

// Where a writer's bytes go; an error stops the writer.
using ByteSink = std::function<Result<void>(std::string_view)>;
// Fills `buf` with up to `n` bytes; 0 at the end of the stream.
using ByteSource = std::function<Result<std::size_t>(char* buf, std::size_t n)>;

// One pax record: "LEN key=value\n", LEN counting itself.
std::string pax_record(std::string_view key, std::string_view value);

class TarWriter {
 public:
  explicit TarWriter(ByteSink sink) : sink_(std::move(sink)) {}
  // Starts an entry. Anything that does not fit ustar's fields (a long or non-ASCII path, a long
  // link target, a size of 8 GiB or more) goes in a pax extended header before it. A file's
  // `size` bytes must follow through write_data before the next add or finish.
  Result<void> add(const TarHeader& h);
  Result<void> write_data(std::string_view data);
  // The end-of-archive blocks, padded to whole 10 KiB records as tar(1) writes them.
  Result<void> finish();
  std::uint64_t bytes_written() const { return written_; }

 private:
  Result<void> emit(std::string_view data);
  Result<void> end_entry();
  ByteSink sink_;
  std::uint64_t remaining_ = 0;  // data bytes the current entry still expects
  std::uint64_t entry_size_ = 0;
  std::uint64_t written_ = 0;
};

class TarReader {
 public:
  explicit TarReader(ByteSource source) : source_(std::move(source)) {}
  // The next entry (pax 'x' and GNU long-name records folded into it; global headers skipped);
  // nullopt at the end of the archive. Data the caller did not read is skipped.
  Result<std::optional<TarHeader>> next();
  // Up to `n` bytes of the current entry's data; 0 when it is all read.
  Result<std::size_t> read_data(char* buf, std::size_t n);

 private:
  Result<bool> read_block(char* block);  // false: clean end of stream
  Result<void> read_exact(char* buf, std::size_t n);
  Result<void> skip_rest();
  Result<std::string> read_body(std::uint64_t size, std::uint64_t cap, std::string_view what);
  ByteSource source_;
  std::uint64_t remaining_ = 0;  // data bytes of the current entry not yet read
  std::uint64_t padding_ = 0;    // zero bytes after them, to the block boundary
  bool done_ = false;
};

}  // namespace kiln::workspace
