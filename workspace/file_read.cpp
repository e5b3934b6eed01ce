// file_read: one streaming pass over the file that hashes it, counts its lines, checks it is text
// and keeps only the requested page, so a huge file never has to fit in memory. Above
// kWholeFileBytes the pass stops as soon as the page is known (bounded work per call).
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/fd_io.h"
#include "workspace/file_ops.h"
#include "workspace/file_ops_internal.h"

namespace kiln::workspace {

namespace {

// Incremental UTF-8 check (RFC 3629: no overlongs, no surrogates, nothing past U+10FFFF) that
// carries its state across read chunks.
class Utf8Check {
 public:
  // Returns false at the first bad byte; `bad_reason` then says what was found.
  bool feed(std::string_view s, std::uint64_t base) {
    for (size_t i = 0; i < s.size(); ++i) {
      auto b = static_cast<unsigned char>(s[i]);
      if (need_ == 0) {
        if (b == 0) return bad(base + i, "a NUL byte");
        if (b < 0x80) continue;
        if (b >= 0xC2 && b <= 0xDF) { need_ = 1; lo_ = 0x80; hi_ = 0xBF; }
        else if (b == 0xE0) { need_ = 2; lo_ = 0xA0; hi_ = 0xBF; }
        else if (b == 0xED) { need_ = 2; lo_ = 0x80; hi_ = 0x9F; }
        else if (b >= 0xE1 && b <= 0xEF) { need_ = 2; lo_ = 0x80; hi_ = 0xBF; }
        else if (b == 0xF0) { need_ = 3; lo_ = 0x90; hi_ = 0xBF; }
        else if (b >= 0xF1 && b <= 0xF3) { need_ = 3; lo_ = 0x80; hi_ = 0xBF; }
        else if (b == 0xF4) { need_ = 3; lo_ = 0x80; hi_ = 0x8F; }
        else return bad(base + i, "invalid UTF-8");
        continue;
      }
      if (b < lo_ || b > hi_) return bad(base + i, "invalid UTF-8");
      lo_ = 0x80;
      hi_ = 0xBF;
      --need_;
    }
    return true;
  }
  bool finish(std::uint64_t end) { return need_ == 0 || bad(end, "a truncated UTF-8 sequence"); }
  std::uint64_t bad_at = 0;
  const char* bad_reason = "";

 private:
  bool bad(std::uint64_t at, const char* why) {
    bad_at = at;
    bad_reason = why;
    return false;
  }
  int need_ = 0;
  unsigned char lo_ = 0x80, hi_ = 0xBF;
};

// Cuts `s` back to a whole number of UTF-8 sequences.
void trim_partial_utf8(std::string& s) {
  size_t i = s.size();
  size_t back = 0;
  while (i > 0 && back < 4 && (static_cast<unsigned char>(s[i - 1]) & 0xC0) == 0x80) {
    --i;
    ++back;
  }
  if (i == 0) return;
  auto lead = static_cast<unsigned char>(s[i - 1]);
  size_t len = lead < 0x80 ? 1 : lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
  if (back + 1 < len) s.resize(i - 1);
}

// Cuts a text stream into lines and keeps lines [offset, offset+limit), stopping before the page
// would pass kMaxPageBytes. `line` counts the newlines seen so far.
class LinePager {
 public:
  LinePager(std::uint64_t offset, std::uint64_t limit) : offset_(offset), limit_(limit) {}

  void feed(std::string_view chunk) {
    size_t pos = 0;
    while (pos < chunk.size()) {
      const void* nl = std::memchr(chunk.data() + pos, '\n', chunk.size() - pos);
      size_t end = nl ? static_cast<size_t>(static_cast<const char*>(nl) - chunk.data()) + 1 : chunk.size();
      if (!stopped && line >= offset_ && line < offset_ + limit_) take(chunk.substr(pos, end - pos));
      if (nl) {
        ++line;
        page_line_start_ = page.size();
      }
      pos = end;
    }
  }
  // The page is complete: nothing later in the file can change it.
  bool full() const { return stopped || line >= offset_ + limit_; }
  bool reached_offset() const { return line >= offset_; }
  // One past the last line of the page (or the first line not shown when the page filled up).
  std::uint64_t end_line(std::uint64_t total_lines) const {
    return stopped ? stop_next : std::min(offset_ + limit_, total_lines);
  }

  std::string page;
  std::uint64_t line = 0;
  bool stopped = false;
  std::uint64_t stop_next = 0;
  std::string note;

 private:
  void take(std::string_view seg) {
    if (page.size() + seg.size() <= kMaxPageBytes) {
      page.append(seg);
      return;
    }
    stopped = true;
    if (line == offset_) {
      // One line bigger than a page: show its start rather than nothing, and say so.
      page.append(seg.substr(0, kMaxPageBytes - page.size()));
      trim_partial_utf8(page);
      stop_next = line + 1;
      note = fmt::format("line {} is longer than {} bytes; only its first {} bytes are shown. Use encoding "
                         "\"base64\" with byte offsets to read all of it",
                         line + 1, kMaxPageBytes, page.size());
    } else {
      page.resize(page_line_start_);
      stop_next = line;
    }
  }

  std::uint64_t offset_, limit_;
  size_t page_line_start_ = 0;  // where the current line began inside `page`
};

Error not_text(std::string_view path, const Utf8Check& u) {
  return {Errc::invalid_argument,
          fmt::format("'{}' is not UTF-8 text ({} at byte {}); pass encoding \"base64\" to read its bytes", path,
                      u.bad_reason, u.bad_at)};
}

Error cancelled(std::string_view path) { return {Errc::cancelled, fmt::format("reading '{}' was cancelled", path)}; }

std::string big_file_note(std::uint64_t size, const ReadRequest& req) {
  return fmt::format("the file is {} bytes, more than the {} that file_read reads whole, so sha256 and total_lines "
                     "are left out{}; use encoding \"base64\" with byte offsets to read anywhere in it",
                     size, req.whole_file_bytes,
                     req.encoding == Encoding::text
                         ? fmt::format(" and text reads scan at most its first {} bytes", req.scan_budget)
                         : "");
}

// A page of a file too big to read whole, in base64: the bytes asked for and nothing else.
Result<ReadResult> read_byte_window(int fd, const ReadRequest& req, std::uint64_t size, std::uint64_t limit,
                                    std::string rel) {
  if (req.offset > size) {
    return fail(Errc::invalid_argument,
                fmt::format("offset {} is past the end of '{}', which has {} bytes (base64 offsets are bytes)",
                            req.offset, req.path, size));
  }
  std::string page(static_cast<size_t>(std::min(limit, size - req.offset)), '\0');
  // Fewer bytes than asked for: it shrank since it was opened.
  ssize_t got = pread_full(fd, page.data(), page.size(), static_cast<off_t>(req.offset));
  if (got < 0) return std::unexpected(detail::errno_error(errno, "read", req.path));
  page.resize(static_cast<size_t>(got));
  ReadResult out;
  out.path = std::move(rel);
  out.encoding = Encoding::base64;
  out.offset = req.offset;
  out.size = size;
  out.count = page.size();
  if (req.offset + page.size() < size) out.next_offset = req.offset + page.size();
  out.truncated = out.next_offset.has_value();
  out.content = detail::base64_encode(page);
  out.note = big_file_note(size, req);
  return out;
}

}  // namespace

Result<ReadResult> read_file(const Root& root, const ReadRequest& req, std::stop_token stop) {
  auto rel = root.relative(req.path);
  if (!rel) return std::unexpected(rel.error());
  // O_NONBLOCK so a FIFO planted in the workspace cannot hang the server on open.
  auto opened = root.open(req.path, O_RDONLY | O_NONBLOCK | O_NOCTTY);
  if (!opened) {
    Error e = opened.error();
    if (e.code == Errc::invalid_argument && e.message.find("is a folder") != std::string::npos)
      e.message += "; use file_list to see what it contains";
    return std::unexpected(std::move(e));
  }
  int fd = opened->get();
  struct stat st {};
  if (::fstat(fd, &st) != 0) return std::unexpected(detail::errno_error(errno, "inspect", req.path));
  if (S_ISDIR(st.st_mode)) {
    return fail(Errc::invalid_argument,
                fmt::format("'{}' is a folder, not a file; use file_list to see what it contains", req.path));
  }
  if (!S_ISREG(st.st_mode)) {
    return fail(Errc::invalid_argument,
                fmt::format("'{}' is not a regular file (a device, pipe or socket) and cannot be read", req.path));
  }

  const bool text = req.encoding == Encoding::text;
  const std::uint64_t offset = req.offset;
  std::uint64_t limit = req.limit.value_or(text ? kDefaultReadLines : kMaxPageBytes);
  if (limit == 0) return fail(Errc::invalid_argument, "limit must be at least 1");
  if (!text) limit = std::min<std::uint64_t>(limit, kMaxPageBytes);
  // The size seen now is as far as this call reads: a file that keeps growing (a log being
  // written) must not keep the call going.
  const std::uint64_t size_at_open = static_cast<std::uint64_t>(st.st_size);
  const bool whole = size_at_open <= req.whole_file_bytes;
  if (!whole && !text) return read_byte_window(fd, req, size_at_open, limit, *rel);

  detail::Sha256 hash;
  Utf8Check utf8;
  LinePager pager(offset, text ? limit : 0);
  std::string bytes_page;  // base64 mode
  std::uint64_t size = 0, lines = 0;
  char last = '\n';
  bool at_end = false;

  std::string buf(65536, '\0');
  for (;;) {
    if (size >= size_at_open) {
      at_end = true;
      break;
    }
    if (stop.stop_requested()) return std::unexpected(cancelled(req.path));
    size_t want = static_cast<size_t>(std::min<std::uint64_t>(buf.size(), size_at_open - size));
    ssize_t n = pread_some(fd, buf.data(), want, static_cast<off_t>(size));
    if (n < 0) return std::unexpected(detail::errno_error(errno, "read", req.path));
    if (n == 0) {  // it shrank since it was opened
      at_end = true;
      break;
    }
    std::string_view chunk(buf.data(), static_cast<size_t>(n));
    if (whole) hash.update(chunk);
    if (text) {
      if (!utf8.feed(chunk, size)) return std::unexpected(not_text(req.path, utf8));
      pager.feed(chunk);
    } else {
      // Bytes [offset, offset+limit) of the file that fall in this chunk.
      std::uint64_t lo = std::max(offset, size), hi = std::min(offset + limit, size + chunk.size());
      if (lo < hi) bytes_page.append(chunk.substr(lo - size, hi - lo));
      lines += static_cast<std::uint64_t>(std::count(chunk.begin(), chunk.end(), '\n'));
    }
    size += chunk.size();
    last = chunk.back();
    if (!whole) {
      if (pager.full()) break;
      if (!pager.reached_offset() && size >= req.scan_budget) {
        return fail(Errc::too_large,
                    fmt::format("line {} of '{}' lies beyond the first {} bytes, which is as far as a text read of a "
                                "file this big ({} bytes) scans (they hold {} lines); read further with encoding "
                                "\"base64\" and a byte offset, e.g. offset {}",
                                offset + 1, req.path, size, size_at_open, pager.line, size));
      }
    }
  }
  if (text) lines = pager.line;
  if (text && at_end && !utf8.finish(size)) return std::unexpected(not_text(req.path, utf8));

  ReadResult out;
  out.path = *rel;
  out.encoding = req.encoding;
  out.offset = offset;
  out.size = at_end ? size : size_at_open;
  std::optional<std::uint64_t> total_lines;
  if (at_end) total_lines = lines + ((size > 0 && last != '\n') ? 1 : 0);
  out.total_lines = total_lines;
  if (whole) out.sha256 = hash.hex();
  out.note = pager.note;
  if (!whole) out.note += (out.note.empty() ? "" : "; ") + big_file_note(size_at_open, req);
  if (text) {
    if (total_lines && offset > *total_lines) {
      return fail(Errc::invalid_argument,
                  fmt::format("offset {} is past the end of '{}', which has {} lines (offsets are 0-based line indexes)",
                              offset, req.path, *total_lines));
    }
    // Without a total (the scan stopped early), the page filled up, so more follows it.
    std::uint64_t end = pager.end_line(total_lines.value_or(std::numeric_limits<std::uint64_t>::max()));
    // A line cut short still counts as returned; the next page starts after it.
    out.count = end - offset;
    if (!total_lines || end < *total_lines) out.next_offset = end;
    out.content = std::move(pager.page);
    out.truncated = out.next_offset.has_value() || pager.stopped;
  } else {
    if (offset > size) {
      return fail(Errc::invalid_argument,
                  fmt::format("offset {} is past the end of '{}', which has {} bytes (base64 offsets are bytes)",
                              offset, req.path, size));
    }
    out.count = bytes_page.size();
    if (offset + bytes_page.size() < size) out.next_offset = offset + bytes_page.size();
    out.content = detail::base64_encode(bytes_page);
    out.truncated = out.next_offset.has_value();
  }
  return out;
}

}  // namespace kiln::workspace
