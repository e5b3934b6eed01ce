// One output stream of a run: kept in full in a file under <state>/runs/<run_id>/ (up to the
// run's cap) with only a bounded tail in memory, so a command printing gigabytes costs the
// server a few KiB. The file (and its folder) is made when the first byte arrives: most commands
// leave a stream empty, and creating inodes was a third of the server's work for a short exec.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>

#include "core/error.h"
#include "core/unique_fd.h"
#include "sandbox/types.h"

namespace kiln::sandbox {

// Replaces invalid UTF-8 sequences with U+FFFD so the text can travel in JSON. A sequence cut
// at the end of `text` is dropped when `drop_incomplete_tail` (the rest comes in the next page).
std::string sanitize_utf8(std::string_view text, bool drop_incomplete_tail = false);

// How many trailing bytes of `text` are the start of a UTF-8 sequence cut by its end (0-3).
std::size_t utf8_incomplete_tail(std::string_view text);

class OutputSpool {
 public:
  // `path` empty: memory tail only. Otherwise the file is created on the first append, and its
  // folder too (mode 0700) when that is missing; an empty stream leaves no file.
  OutputSpool(std::string path, std::size_t tail_keep);
  OutputSpool(const OutputSpool&) = delete;
  OutputSpool& operator=(const OutputSpool&) = delete;

  void append(std::string_view data);
  void add_dropped(std::uint64_t n);
  std::uint64_t size() const;
  std::uint64_t dropped() const;
  // The last `max` bytes (cut forward to a UTF-8 boundary), with totals.
  StreamTail tail(std::size_t max) const;
  // Bytes [offset, offset+limit) of the stream; from memory when they are still in the tail,
  // else from the file.
  std::string read(std::uint64_t offset, std::size_t limit) const;
  const std::string& path() const { return path_; }
  // The errno of the write that failed (ENOSPC: the state dir is full), 0 while all was written.
  int write_error() const;

 private:
  void open_file();  // with mu_ held
  mutable std::mutex mu_;
  std::string path_;
  UniqueFd fd_;
  std::size_t tail_keep_;
  std::string tail_;          // the last bytes, at most 2 * tail_keep_
  std::uint64_t total_ = 0;
  std::uint64_t dropped_ = 0;
  int write_error_ = 0;
};

}  // namespace kiln::sandbox
