// A run's stdout and stderr interleaved as they arrived (sandbox_process with stream "both").
// Most runs write to one stream only; then the combined stream is that stream, and keeping a
// second copy of every byte on disk (what a separate file cost) doubled the writes of a large
// output. So the combined stream reads through to the one stream until the other one first
// speaks. From then on it is that stream's bytes so far (still read from its own spool, never
// copied) followed by a file of its own that takes every later chunk of either stream: nothing is
// copied when the second stream speaks, however large the first one has grown. The `output` file
// therefore holds the interleaving from that moment on.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>

#include "sandbox/output_spool.h"

namespace kiln::sandbox {

class CombinedOutput {
 public:
  // `out` and `err` are the run's stream spools and must outlive this; `path` is where the
  // combined file goes once both streams have spoken.
  CombinedOutput(std::string path, std::size_t tail_keep, const OutputSpool& out, const OutputSpool& err);

  // After the stream's own spool took `text` (so the spools always hold every byte before it).
  void append(bool is_err, std::string_view text);
  std::uint64_t size() const;
  std::string read(std::uint64_t offset, std::size_t limit) const;
  // Bytes this object itself wrote to disk (0 while it reads through to one stream).
  std::uint64_t bytes_on_disk() const;
  int write_error() const;

 private:
  const OutputSpool& first() const { return first_ == 0 ? out_ : err_; }

  mutable std::mutex mu_;
  const OutputSpool& out_;
  const OutputSpool& err_;
  OutputSpool own_;
  int first_ = -1;          // 0 stdout, 1 stderr: the stream that spoke first
  bool mixed_ = false;      // both have spoken
  std::uint64_t prefix_ = 0;  // once mixed: the first stream's bytes before the other spoke
};

}  // namespace kiln::sandbox
