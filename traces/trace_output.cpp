// Output of a traced run: the files the runner writes beside traces.db, read back in pages or
// searched line by line in bounded memory, however large the run's output grew.
#define PCRE2_CODE_UNIT_WIDTH 8
#include <errno.h>
#include <fcntl.h>
#include <pcre2.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fmt/format.h>

#include "core/fd_io.h"
#include "core/unique_fd.h"
#include "traces/trace_store.h"
#include "traces/trace_util.h"

namespace kiln::traces {

namespace {

constexpr size_t kReadChunk = 1 << 20;
constexpr size_t kMaxSearchedLine = 1 << 20;  // a longer line is searched in its first MiB only
constexpr uint64_t kScanBudget = 64ull << 20;
constexpr size_t kLineCacheMax = 256;

// Reads up to n bytes at off, appending to out; returns bytes read or -1.
ssize_t pread_append(int fd, std::string& out, size_t n, uint64_t off) {
  size_t old = out.size();
  out.resize(old + n);
  ssize_t got = pread_full(fd, out.data() + old, n, off_t(off));
  out.resize(got < 0 ? old : old + size_t(got));
  return got;
}

struct Pcre {
  pcre2_code* code = nullptr;
  pcre2_match_data* md = nullptr;
  pcre2_match_context* mctx = nullptr;
  bool jit = false;
  ~Pcre() {
    if (md) pcre2_match_data_free(md);
    if (mctx) pcre2_match_context_free(mctx);
    if (code) pcre2_code_free(code);
  }
  bool match(std::string_view line) const {
    auto subject = reinterpret_cast<PCRE2_SPTR>(line.data());
    int rc = jit ? pcre2_jit_match(code, subject, line.size(), 0, 0, md, mctx)
                 : pcre2_match(code, subject, line.size(), 0, 0, md, mctx);
    return rc >= 0;  // hitting the match limit counts as no match rather than failing the search
  }
};

// Cuts at a UTF-8 sequence boundary so the caller's sanitising does not turn a cut into U+FFFD.
std::string cut_line(std::string_view line, bool& truncated) {
  truncated = line.size() > kGrepLineBytes;
  if (!truncated) return std::string(line);
  size_t cut = kGrepLineBytes;
  for (int i = 0; i < 3 && cut > 0 && (uint8_t(line[cut]) & 0xC0) == 0x80; ++i) --cut;
  return std::string(line.substr(0, cut));
}

Result<uint64_t> count_newlines(int fd, uint64_t end) {
  std::string buf;
  uint64_t n = 0;
  for (uint64_t off = 0; off < end;) {
    buf.clear();
    ssize_t got = pread_append(fd, buf, size_t(std::min<uint64_t>(kReadChunk, end - off)), off);
    if (got < 0) return fail(Errc::io, fmt::format("cannot read trace output: {}", std::strerror(errno)));
    if (got == 0) break;
    n += uint64_t(std::count(buf.begin(), buf.end(), '\n'));
    off += uint64_t(got);
  }
  return n;
}

}  // namespace

Result<std::string> TraceStore::output_dir(const std::string& id) {
  if (!detail::valid_trace_id(id))
    return fail(Errc::invalid_argument, fmt::format("'{}' is not a trace id", id));
  std::string traces = dir_ + "/traces";
  ::mkdir(traces.c_str(), 0700);
  return traces + "/" + id;
}

Result<std::string> TraceStore::stream_path(const std::string& id, const std::string& stream) {
  if (stream != "stdout" && stream != "stderr")
    return fail(Errc::invalid_argument, fmt::format("stream '{}' is neither stdout nor stderr", stream));
  auto rec = get(id);
  if (!rec) return std::unexpected(rec.error());
  if (!*rec) return fail(Errc::not_found, fmt::format("no trace {}; trace_list shows the traces there are", id));
  return fmt::format("{}/traces/{}/{}", dir_, id, stream);
}

Result<OutputSlice> TraceStore::read_output(const std::string& id, const std::string& stream, int64_t offset,
                                            size_t limit) {
  auto path = stream_path(id, stream);
  if (!path) return std::unexpected(path.error());
  OutputSlice s;
  UniqueFd fd(::open(path->c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  struct stat st {};
  if (fd.get() < 0) {
    // No file: the run wrote nothing to this stream (or has not yet).
    if (errno != ENOENT) return fail(Errc::io, fmt::format("cannot open {}: {}", *path, std::strerror(errno)));
  } else if (::fstat(fd.get(), &st) != 0) {
    return fail(Errc::io, fmt::format("cannot stat {}: {}", *path, std::strerror(errno)));
  }
  s.total_bytes = uint64_t(st.st_size);
  s.offset = offset >= 0 ? uint64_t(offset)
                         : s.total_bytes - std::min<uint64_t>(s.total_bytes, uint64_t(-(offset + 1)) + 1);
  s.next_offset = s.offset;
  limit = limit == 0 ? kOutputPageMax : std::min(limit, kOutputPageMax);
  if (fd.get() >= 0 && s.offset < s.total_bytes) {
    size_t want = size_t(std::min<uint64_t>(limit, s.total_bytes - s.offset));
    if (pread_append(fd.get(), s.data, want, s.offset) < 0)
      return fail(Errc::io, fmt::format("cannot read {}: {}", *path, std::strerror(errno)));
    s.next_offset = s.offset + s.data.size();
  }
  s.eof = s.next_offset >= s.total_bytes;
  return s;
}

Result<GrepResult> TraceStore::grep_output(const std::string& id, const std::string& stream,
                                           const std::string& pattern, uint64_t offset, int limit_matches) {
  const size_t max_matches = limit_matches <= 0 ? 100 : size_t(std::min(limit_matches, 1000));
  Pcre re;
  int err = 0;
  PCRE2_SIZE err_at = 0;
  // MATCH_INVALID_UTF: build output is not always UTF-8, and a stray byte must not end the search.
  re.code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                          PCRE2_UTF | PCRE2_MATCH_INVALID_UTF, &err, &err_at, nullptr);
  if (!re.code) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    return fail(Errc::invalid_argument,
                fmt::format("invalid grep pattern at offset {}: {} (patterns are PCRE2 regular expressions)",
                            err_at, reinterpret_cast<const char*>(msg)));
  }
  re.jit = pcre2_jit_compile(re.code, PCRE2_JIT_COMPLETE) == 0;
  re.md = pcre2_match_data_create_from_pattern(re.code, nullptr);
  re.mctx = pcre2_match_context_create(nullptr);
  if (!re.md || !re.mctx) return fail(Errc::internal, "out of memory compiling the grep pattern");
  pcre2_set_match_limit(re.mctx, 10'000'000);

  auto path = stream_path(id, stream);
  if (!path) return std::unexpected(path.error());
  // A running trace's last line may still be half-written: it is left for a later call.
  bool running = false;
  if (auto rec = get(id); rec && *rec) running = (*rec)->status == "running";

  GrepResult g;
  UniqueFd fd(::open(path->c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  struct stat st {};
  if (fd.get() < 0) {
    if (errno != ENOENT) return fail(Errc::io, fmt::format("cannot open {}: {}", *path, std::strerror(errno)));
    g.eof = true;
    return g;
  }
  if (::fstat(fd.get(), &st) != 0) return fail(Errc::io, fmt::format("cannot stat {}: {}", *path, std::strerror(errno)));
  const uint64_t size = uint64_t(st.st_size);  // bytes appended while scanning wait for the next call
  const uint64_t start = std::min(offset, size);
  g.total_bytes = size;

  const std::string key_prefix = fmt::format("{}/{}/", id, stream);
  uint64_t line_no = 1;
  if (start > 0) {
    if (auto cached = cached_line(key_prefix + std::to_string(start))) {
      line_no = *cached;
    } else {
      auto n = count_newlines(fd.get(), start);
      if (!n) return std::unexpected(n.error());
      line_no = *n + 1;
    }
  }

  auto emit = [&](std::string_view line, uint64_t at) {
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (!re.match(line.substr(0, kMaxSearchedLine))) return;
    GrepMatch m{line_no, at, {}, false};
    m.text = cut_line(line, m.truncated);
    g.matches.push_back(std::move(m));
  };
  auto read_error = [&] { return fail(Errc::io, fmt::format("cannot read {}: {}", *path, std::strerror(errno))); };

  std::string buf;          // bytes [buf_off, buf_off + buf.size()) of the file
  uint64_t buf_off = start;
  size_t cur = 0;           // index in buf of the current line's start
  uint64_t line_start = start;
  bool held_back = false;
  while (g.matches.size() < max_matches && line_start < size && line_start - start < kScanBudget) {
    const char* base = buf.data();
    auto nl = static_cast<const char*>(std::memchr(base + cur, '\n', buf.size() - cur));
    if (nl) {
      size_t len = size_t(nl - (base + cur));
      emit(std::string_view(base + cur, len), line_start);
      cur += len + 1;
      line_start += len + 1;
      ++line_no;
      continue;
    }
    const bool file_end = buf_off + buf.size() >= size;
    if (!file_end && buf.size() - cur < kMaxSearchedLine) {
      buf.erase(0, cur);
      buf_off += cur;
      cur = 0;
      uint64_t at = buf_off + buf.size();
      ssize_t got = pread_append(fd.get(), buf, size_t(std::min<uint64_t>(kReadChunk, size - at)), at);
      if (got < 0) return read_error();
      if (got == 0) break;  // the file shrank under us
      continue;
    }
    if (file_end) {
      if (running) {
        held_back = true;
        break;
      }
      emit(std::string_view(base + cur, buf.size() - cur), line_start);
      line_start = size;
      break;
    }
    // An overlong line: its first MiB was searched; the rest is skipped up to its newline.
    emit(std::string_view(base + cur, buf.size() - cur), line_start);
    uint64_t at = buf_off + buf.size();
    bool found = false;
    while (at < size && !found) {
      buf.clear();
      ssize_t got = pread_append(fd.get(), buf, size_t(std::min<uint64_t>(kReadChunk, size - at)), at);
      if (got < 0) return read_error();
      if (got == 0) break;
      if (auto p = static_cast<const char*>(std::memchr(buf.data(), '\n', buf.size()))) {
        at += uint64_t(p - buf.data()) + 1;
        found = true;
      } else {
        at += uint64_t(got);
      }
    }
    line_start = at;
    if (found) ++line_no;
    buf.clear();
    buf_off = at;
    cur = 0;
  }
  g.next_offset = line_start;
  g.eof = line_start >= size || held_back;
  cache_line(key_prefix + std::to_string(line_start), line_no);
  return g;
}

std::optional<uint64_t> TraceStore::cached_line(const std::string& key) {
  std::lock_guard lock(line_mu_);
  auto it = line_cache_.find(key);
  if (it == line_cache_.end()) return std::nullopt;
  return it->second;
}

void TraceStore::cache_line(const std::string& key, uint64_t line) {
  std::lock_guard lock(line_mu_);
  if (line_cache_.size() >= kLineCacheMax) line_cache_.clear();
  line_cache_[key] = line;
}

}  // namespace kiln::traces
