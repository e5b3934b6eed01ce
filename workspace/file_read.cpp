// file_read: one streaming pass over the file that hashes it, counts its lines, checks it is text
// and keeps only the requested page, so a huge file never has to fit in memory.
#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

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

}  // namespace

Result<ReadResult> read_file(const Root& root, const ReadRequest& req) {
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

  detail::Sha256 hash;
  Utf8Check utf8;
  std::string page;
  std::uint64_t size = 0, line = 0;
  char last = '\n';
  // Text paging state: the page holds lines [offset, stop_line); page_line_start is where the
  // current line began inside `page`, so a line that does not fit can be taken back out.
  bool stopped = false;
  std::optional<std::uint64_t> stop_next;
  size_t page_line_start = 0;
  std::string note;

  std::string buf(65536, '\0');
  for (;;) {
    ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return std::unexpected(detail::errno_error(errno, "read", req.path));
    }
    if (n == 0) break;
    std::string_view chunk(buf.data(), static_cast<size_t>(n));
    hash.update(chunk);
    if (text && !utf8.feed(chunk, size)) {
      return fail(Errc::invalid_argument,
                  fmt::format("'{}' is not UTF-8 text ({} at byte {}); pass encoding \"base64\" to read its bytes",
                              req.path, utf8.bad_reason, utf8.bad_at));
    }
    if (!text) {
      // Bytes [offset, offset+limit) of the file that fall in this chunk.
      std::uint64_t lo = std::max(offset, size), hi = std::min(offset + limit, size + chunk.size());
      if (lo < hi) page.append(chunk.substr(lo - size, hi - lo));
      line += static_cast<std::uint64_t>(std::count(chunk.begin(), chunk.end(), '\n'));
    } else {
      size_t pos = 0;
      while (pos < chunk.size()) {
        const void* nl = std::memchr(chunk.data() + pos, '\n', chunk.size() - pos);
        size_t end = nl ? static_cast<size_t>(static_cast<const char*>(nl) - chunk.data()) + 1 : chunk.size();
        if (!stopped && line >= offset && line < offset + limit) {
          std::string_view seg = chunk.substr(pos, end - pos);
          if (page.size() + seg.size() > kMaxPageBytes) {
            stopped = true;
            if (line == offset) {
              // One line bigger than a page: show its start rather than nothing, and say so.
              page.append(seg.substr(0, kMaxPageBytes - page.size()));
              trim_partial_utf8(page);
              stop_next = line + 1;
              note = fmt::format("line {} is longer than {} bytes; only its first {} bytes are shown. Use encoding "
                                 "\"base64\" with byte offsets to read all of it",
                                 line + 1, kMaxPageBytes, page.size());
            } else {
              page.resize(page_line_start);
              stop_next = line;
            }
          } else {
            page.append(seg);
          }
        }
        if (nl) {
          ++line;
          page_line_start = page.size();
        }
        pos = end;
      }
    }
    size += chunk.size();
    last = chunk.back();
  }
  if (text && !utf8.finish(size)) {
    return fail(Errc::invalid_argument,
                fmt::format("'{}' is not UTF-8 text ({} at byte {}); pass encoding \"base64\" to read its bytes",
                            req.path, utf8.bad_reason, utf8.bad_at));
  }
  std::uint64_t total_lines = line + ((size > 0 && last != '\n') ? 1 : 0);

  ReadResult out;
  out.path = *rel;
  out.encoding = req.encoding;
  out.offset = offset;
  out.total_lines = total_lines;
  out.sha256 = hash.hex();
  out.size = size;
  out.note = std::move(note);
  if (text) {
    if (offset > total_lines) {
      return fail(Errc::invalid_argument,
                  fmt::format("offset {} is past the end of '{}', which has {} lines (offsets are 0-based line indexes)",
                              offset, req.path, total_lines));
    }
    std::uint64_t end = stopped ? *stop_next : std::min(offset + limit, total_lines);
    // A line cut short still counts as returned; the next page starts after it.
    out.count = end - offset;
    if (end < total_lines) out.next_offset = end;
    out.content = std::move(page);
  } else {
    if (offset > size) {
      return fail(Errc::invalid_argument,
                  fmt::format("offset {} is past the end of '{}', which has {} bytes (base64 offsets are bytes)",
                              offset, req.path, size));
    }
    out.count = page.size();
    if (offset + page.size() < size) out.next_offset = offset + page.size();
    out.content = detail::base64_encode(page);
  }
  out.truncated = out.next_offset.has_value() || !out.note.empty();
  return out;
}

}  // namespace kiln::workspace
