// Output spooling: full text to disk, bounded tail in memory, paged reads.
#include "sandbox/output_spool.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "core/fd_io.h"

namespace kiln::sandbox {

namespace {

// Length of the valid UTF-8 sequence at s[i], or 0 if invalid, or -1 if cut by the end.
int utf8_len(std::string_view s, std::size_t i) {
  auto c = static_cast<unsigned char>(s[i]);
  int n;
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) n = 2;
  else if (c >= 0xE0 && c <= 0xEF) n = 3;
  else if (c >= 0xF0 && c <= 0xF4) n = 4;
  else return 0;
  for (int k = 1; k < n; ++k) {
    if (i + std::size_t(k) >= s.size()) return -1;
    auto d = static_cast<unsigned char>(s[i + std::size_t(k)]);
    if ((d & 0xC0) != 0x80) return 0;
    if (k == 1) {
      if (c == 0xE0 && d < 0xA0) return 0;
      if (c == 0xED && d > 0x9F) return 0;
      if (c == 0xF0 && d < 0x90) return 0;
      if (c == 0xF4 && d > 0x8F) return 0;
    }
  }
  return n;
}

}  // namespace

std::string sanitize_utf8(std::string_view text, bool drop_incomplete_tail) {
  std::string out;
  out.reserve(text.size());
  std::size_t i = 0;
  while (i < text.size()) {
    int n = utf8_len(text, i);
    if (n > 0) {
      out.append(text.substr(i, std::size_t(n)));
      i += std::size_t(n);
    } else if (n < 0 && drop_incomplete_tail) {
      break;
    } else {
      out += "\xEF\xBF\xBD";
      ++i;
    }
  }
  return out;
}

std::size_t utf8_incomplete_tail(std::string_view text) {
  for (std::size_t back = 1; back <= 3 && back <= text.size(); ++back) {
    std::size_t i = text.size() - back;
    auto c = static_cast<unsigned char>(text[i]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: keep looking for the lead
    if (c < 0x80) return 0;
    return utf8_len(text, i) < 0 ? back : 0;
  }
  return 0;
}

OutputSpool::OutputSpool(std::string path, std::size_t tail_keep) : path_(std::move(path)), tail_keep_(tail_keep) {}

void OutputSpool::open_file() {
  constexpr int kFlags = O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW;
  fd_.reset(::open(path_.c_str(), kFlags, 0600));
  if (!fd_ && errno == ENOENT) {
    // The run's folder is made with its first file; the folders above it are the state dir's.
    std::string dir = path_.substr(0, path_.rfind('/'));
    if (::mkdir(dir.c_str(), 0700) == 0 || errno == EEXIST) fd_.reset(::open(path_.c_str(), kFlags, 0600));
  }
  if (!fd_) write_error_ = errno;
}

void OutputSpool::append(std::string_view data) {
  std::lock_guard lock(mu_);
  if (data.empty()) return;
  if (!fd_ && !path_.empty() && total_ == 0 && write_error_ == 0) open_file();
  if (fd_ && !pwrite_all(fd_.get(), data.data(), data.size(), off_t(total_))) {
    // Disk full or gone: keep the tail in memory only, and give the space back (the file is cut
    // to nothing) so the run's record can still be written; the caller reports it.
    write_error_ = errno;
    if (write_error_ == ENOSPC || write_error_ == EDQUOT) (void)::ftruncate(fd_.get(), 0);
    fd_.reset();
  }
  total_ += data.size();
  if (tail_keep_ == 0) return;
  // The tail must stay the stream's last bytes: read() serves offsets from it by position. A chunk
  // at least as long as the kept tail replaces it (appending only the chunk's end to the old tail
  // left a gap, and pages starting in it got bytes from earlier in the stream).
  if (data.size() >= tail_keep_) {
    tail_.assign(data.substr(data.size() - tail_keep_));
    return;
  }
  tail_.append(data);
  if (tail_.size() > 2 * tail_keep_) tail_.erase(0, tail_.size() - tail_keep_);
}

int OutputSpool::write_error() const {
  std::lock_guard lock(mu_);
  return write_error_;
}

void OutputSpool::add_dropped(std::uint64_t n) {
  std::lock_guard lock(mu_);
  dropped_ += n;
}

std::uint64_t OutputSpool::size() const {
  std::lock_guard lock(mu_);
  return total_;
}

std::uint64_t OutputSpool::dropped() const {
  std::lock_guard lock(mu_);
  return dropped_;
}

StreamTail OutputSpool::tail(std::size_t max) const {
  std::lock_guard lock(mu_);
  StreamTail t;
  t.total_bytes = total_;
  t.dropped_bytes = dropped_;
  std::size_t take = std::min({max, tail_.size(), std::size_t(total_)});
  std::size_t start = tail_.size() - take;
  // Do not begin inside a UTF-8 sequence.
  int skip = 0;
  while (start < tail_.size() && skip < 3 && (static_cast<unsigned char>(tail_[start]) & 0xC0) == 0x80) {
    ++start;
    ++skip;
  }
  t.text = sanitize_utf8(std::string_view(tail_).substr(start));
  t.tail_offset = total_ - (tail_.size() - start);
  t.truncated = t.tail_offset > 0 || dropped_ > 0;
  return t;
}

std::string OutputSpool::read(std::uint64_t offset, std::size_t limit) const {
  std::lock_guard lock(mu_);
  if (offset >= total_) return {};
  std::size_t want = std::size_t(std::min<std::uint64_t>(limit, total_ - offset));
  const std::uint64_t tail_start = total_ - tail_.size();
  if (offset >= tail_start) return tail_.substr(std::size_t(offset - tail_start), want);
  if (!fd_) {
    // The file is gone (disk full): only what the tail still holds can be served.
    return {};
  }
  std::string out(want, '\0');
  ssize_t got = pread_full(fd_.get(), out.data(), want, off_t(offset));
  out.resize(got < 0 ? 0 : std::size_t(got));
  return out;
}

}  // namespace kiln::sandbox
