// CombinedOutput: reading through to one stream, and taking over when the second one speaks.
#include "sandbox/combined_output.h"

namespace kiln::sandbox {

CombinedOutput::CombinedOutput(std::string path, std::size_t tail_keep, const OutputSpool& out, const OutputSpool& err)
    : out_(out), err_(err), own_(std::move(path), tail_keep) {}

const OutputSpool* CombinedOutput::single() const {
  if (mixed_ || first_ < 0) return nullptr;
  return first_ == 0 ? &out_ : &err_;
}

void CombinedOutput::append(bool is_err, std::string_view text) {
  if (text.empty()) return;
  std::lock_guard lock(mu_);
  if (!mixed_) {
    const int stream = is_err ? 1 : 0;
    if (first_ < 0) first_ = stream;
    if (first_ == stream) return;  // the combined stream is still this one stream
    // The first stream's spool holds all of its bytes, and none of the other's yet: exactly the
    // interleaving so far.
    own_.seed_from(first_ == 0 ? out_ : err_);
    mixed_ = true;
  }
  own_.append(text);
}

std::uint64_t CombinedOutput::size() const {
  std::lock_guard lock(mu_);
  if (const OutputSpool* s = single()) return s->size();
  return own_.size();
}

std::string CombinedOutput::read(std::uint64_t offset, std::size_t limit) const {
  std::lock_guard lock(mu_);
  if (const OutputSpool* s = single()) return s->read(offset, limit);
  return own_.read(offset, limit);
}

std::uint64_t CombinedOutput::bytes_on_disk() const {
  std::lock_guard lock(mu_);
  return mixed_ ? own_.size() : 0;
}

int CombinedOutput::write_error() const { return own_.write_error(); }

}  // namespace kiln::sandbox
