// CombinedOutput: reading through to one stream, then that stream's prefix followed by a file of
// its own once the other stream speaks.
#include "sandbox/combined_output.h"

#include <algorithm>

namespace kiln::sandbox {

CombinedOutput::CombinedOutput(std::string path, std::size_t tail_keep, const OutputSpool& out, const OutputSpool& err)
    : out_(out), err_(err), own_(std::move(path), tail_keep) {}

void CombinedOutput::append(bool is_err, std::string_view text) {
  if (text.empty()) return;
  std::lock_guard lock(mu_);
  if (!mixed_) {
    const int stream = is_err ? 1 : 0;
    if (first_ < 0) first_ = stream;
    if (first_ == stream) return;  // the combined stream is still this one stream
    // The first stream's spool holds all of its bytes and none of the other's yet: exactly the
    // interleaving so far, which stays readable there.
    prefix_ = first().size();
    mixed_ = true;
  }
  own_.append(text);
}

std::uint64_t CombinedOutput::size() const {
  std::lock_guard lock(mu_);
  if (first_ < 0) return 0;
  if (!mixed_) return first().size();
  return prefix_ + own_.size();
}

std::string CombinedOutput::read(std::uint64_t offset, std::size_t limit) const {
  std::lock_guard lock(mu_);
  if (first_ < 0) return {};
  if (!mixed_) return first().read(offset, limit);
  std::string out;
  if (offset < prefix_) {
    const std::size_t want = std::size_t(std::min<std::uint64_t>(limit, prefix_ - offset));
    out = first().read(offset, want);
    if (out.size() < want) return out;  // the first stream's file is gone (disk full): no more
    offset += want;
    limit -= want;
  }
  if (limit > 0) out += own_.read(offset - prefix_, limit);
  return out;
}

std::uint64_t CombinedOutput::bytes_on_disk() const {
  std::lock_guard lock(mu_);
  return mixed_ ? own_.size() : 0;
}

int CombinedOutput::write_error() const { return own_.write_error(); }

}  // namespace kiln::sandbox
