// Search = walk + per-file scan + a bounded, deterministic collection. Files are read in chunks
// into a per-worker buffer (no mmap: a file truncated under a mapping would kill the server with
// SIGBUS), matched whole, and only matching lines get line numbers and context.
#include "workspace/search.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/fd_io.h"
#include "workspace/glob.h"
#include "workspace/search_matcher.h"
#include "workspace/search_text.h"
#include "workspace/tree_walk.h"

namespace kiln::workspace {

namespace {

constexpr size_t kDefaultChunk = 4u << 20;
constexpr size_t kMaxLineBuffer = 64u << 20;  // a "line" longer than this is cut into pieces
constexpr size_t kBinaryProbe = 8192;

struct FileHits {
  std::string path;
  std::vector<SearchMatch> hits;
};

// Keeps the first max_results matches in (path, line) order whatever order files finish in:
// files are appended, and once twice the budget is held they are sorted and cut, and the last
// kept path becomes a cutoff that later files beyond it need not even collect for.
class Collector {
 public:
  explicit Collector(size_t max) : max_(max) {}

  bool wants(std::string_view path) {
    std::lock_guard lk(mu_);
    return !cutoff_ || !path_less(*cutoff_, path);
  }

  void add(std::string path, std::vector<SearchMatch> hits, size_t seen) {
    std::lock_guard lk(mu_);
    total_seen_ += seen;
    if (seen > 0) ++files_matched_;
    if (hits.empty() || (cutoff_ && path_less(*cutoff_, path))) return;
    stored_ += hits.size();
    files_.push_back({std::move(path), std::move(hits)});
    if (stored_ >= 2 * max_) compact();
  }

  void finish(SearchResult& out) {
    std::lock_guard lk(mu_);
    compact();
    out.total_matches_seen = total_seen_;
    out.files_matched = files_matched_;
    out.matches.reserve(stored_);
    for (auto& f : files_) {
      for (auto& m : f.hits) {
        m.path = f.path;
        out.matches.push_back(std::move(m));
      }
    }
    out.truncated = total_seen_ > out.matches.size();
  }

 private:
  void compact() {
    std::sort(files_.begin(), files_.end(), [](const FileHits& a, const FileHits& b) { return path_less(a.path, b.path); });
    size_t kept = 0, i = 0;
    for (; i < files_.size() && kept < max_; ++i) {
      auto& h = files_[i].hits;
      if (kept + h.size() > max_) h.resize(max_ - kept);
      kept += h.size();
    }
    files_.erase(files_.begin() + static_cast<ptrdiff_t>(i), files_.end());
    stored_ = kept;
    if (kept >= max_) cutoff_ = files_.back().path;
  }

  std::mutex mu_;
  size_t max_;
  std::vector<FileHits> files_;
  size_t stored_ = 0;
  size_t total_seen_ = 0;
  size_t files_matched_ = 0;
  std::optional<std::string> cutoff_;
};

// Per-thread state. The buffer is raw (not a vector) so growing it never zero-fills.
struct Worker {
  explicit Worker(Matcher::Scratch s) : scratch(std::move(s)) {}
  Matcher::Scratch scratch;
  std::unique_ptr<char[]> data;
  size_t cap = 0;

  void reserve(size_t n, size_t keep) {
    if (n <= cap) return;
    size_t grown = std::max(n, cap * 2);
    std::unique_ptr<char[]> fresh(new char[grown]);
    if (keep) std::memcpy(fresh.get(), data.get(), keep);
    data = std::move(fresh);
    cap = grown;
  }
};

std::string_view line_text(const char* buf, size_t start, size_t end) {
  std::string_view line(buf + start, end - start);
  if (line.ends_with('\r')) line.remove_suffix(1);
  return line;
}

size_t count_newlines(const char* p, const char* end) {
  size_t n = 0;
  while ((p = static_cast<const char*>(std::memchr(p, '\n', end - p)))) {
    ++n;
    ++p;
  }
  return n;
}

enum class Scan { done, binary, unreadable, stopped };

struct ScanParams {
  const Matcher& matcher;
  int context;
  size_t chunk;
  size_t max_hits;
  Collector& collector;
  const std::stop_token& stop;
};

// Scans one open file, appending up to max_hits matches (when the collector still wants this
// path) and counting every matching line in `seen`.
Scan scan_file(int fd, std::string_view path, const ScanParams& p, Worker& w, std::vector<SearchMatch>& hits,
               size_t& seen) {
  struct stat st{};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return Scan::unreadable;
  const size_t expected = static_cast<size_t>(st.st_size);
  size_t chunk = std::max<size_t>(p.chunk, 16);
  // A file smaller than a chunk is read as the size fstat saw, sparing it a read() that returns 0.
  const bool small = expected > 0 && expected < chunk;
  size_t len = 0, scan_from = 0, total_read = 0;
  size_t base_line = 1;  // line number of the buffer's first byte
  bool eof = false, first = true;
  std::optional<bool> wanted;
  struct Pending {
    size_t index;
    int remaining;
  };
  std::vector<Pending> pending;

  for (;;) {
    size_t limit = len + (small ? expected : chunk);
    w.reserve(limit, len);
    const size_t fresh_from = len;
    while (len < limit && !eof) {
      // Never past the size seen at open: a file that keeps growing (a log being written, a
      // sparse file extended in a loop) must not keep the search going.
      if (total_read >= expected) {
        eof = true;
        break;
      }
      ssize_t n = read_some(fd, w.data.get() + len, std::min(limit - len, expected - total_read));
      if (n <= 0) {
        eof = true;
        break;
      }
      len += static_cast<size_t>(n);
      total_read += static_cast<size_t>(n);
    }
    if (total_read >= expected) eof = true;
    const char* b = w.data.get();
    if (first) {
      first = false;
      if (std::memchr(b, '\0', std::min(len, kBinaryProbe))) return Scan::binary;
    }
    // A NUL further in makes it binary too (as grep decides): a text head on a huge sparse file
    // must not have its gigabytes of zeros scanned as one endless line.
    if (len > fresh_from && std::memchr(b + fresh_from, '\0', len - fresh_from)) return Scan::binary;
    size_t region_end = len;
    if (!eof) {
      const void* nl = len > scan_from ? ::memrchr(b + scan_from, '\n', len - scan_from) : nullptr;
      if (nl) {
        region_end = static_cast<const char*>(nl) - b + 1;
      } else if (len < kMaxLineBuffer) {
        continue;  // one line longer than a chunk: read on before scanning
      }
    }

    // Lines at the start of this region finish the after-context of matches near the last one's end.
    size_t at = scan_from;
    while (!pending.empty() && at < region_end) {
      const char* nl = static_cast<const char*>(std::memchr(b + at, '\n', region_end - at));
      size_t le = nl ? static_cast<size_t>(nl - b) : region_end;
      for (auto& pe : pending) {
        if (pe.remaining > 0) {
          hits[pe.index].after.push_back(clip_line(line_text(b, at, le), 0, kMaxLineBytes));
          --pe.remaining;
        }
      }
      std::erase_if(pending, [](const Pending& pe) { return pe.remaining == 0; });
      at = le + 1;
    }

    std::string_view subject(b, region_end);
    Matcher::LineHit hit;
    size_t from = scan_from, counted_at = 0, line_no = base_line;
    while (from < region_end && p.matcher.next_line(subject, from, w.scratch, hit)) {
      line_no += count_newlines(b + counted_at, b + hit.line_start);
      counted_at = hit.line_start;
      ++seen;
      from = hit.line_end + 1;
      if (!wanted) wanted = p.collector.wants(path);
      if (!*wanted || hits.size() >= p.max_hits) continue;
      SearchMatch m;
      m.line = line_no;
      m.column = hit.match_at - hit.line_start + 1;
      m.text = clip_line(line_text(b, hit.line_start, hit.line_end), hit.match_at - hit.line_start, kMaxLineBytes);
      if (p.context > 0) {
        size_t ls = hit.line_start;
        for (int i = 0; i < p.context && ls > 0; ++i) {
          size_t prev_end = ls - 1;  // the newline ending the previous line
          const void* nl = prev_end > 0 ? ::memrchr(b, '\n', prev_end) : nullptr;
          size_t prev_start = nl ? static_cast<const char*>(nl) - b + 1 : 0;
          m.before.push_back(clip_line(line_text(b, prev_start, prev_end), 0, kMaxLineBytes));
          ls = prev_start;
        }
        std::reverse(m.before.begin(), m.before.end());
        size_t next = hit.line_end + 1;
        for (int i = 0; i < p.context && next < region_end; ++i) {
          const char* nl = static_cast<const char*>(std::memchr(b + next, '\n', region_end - next));
          size_t le = nl ? static_cast<size_t>(nl - b) : region_end;
          m.after.push_back(clip_line(line_text(b, next, le), 0, kMaxLineBytes));
          next = le + 1;
        }
        if (!eof && static_cast<int>(m.after.size()) < p.context) {
          pending.push_back({hits.size(), p.context - static_cast<int>(m.after.size())});
        }
      }
      hits.push_back(std::move(m));
    }
    if (eof) return Scan::done;
    if (p.stop.stop_requested()) return Scan::stopped;

    // Carry the partial last line and `context` complete lines (for before-context) forward.
    size_t keep_from = region_end;
    for (int i = 0; i < p.context && keep_from > 0; ++i) {
      const void* nl = keep_from > 1 ? ::memrchr(b, '\n', keep_from - 1) : nullptr;
      keep_from = nl ? static_cast<const char*>(nl) - b + 1 : 0;
    }
    base_line += count_newlines(b, b + keep_from);
    std::memmove(w.data.get(), b + keep_from, len - keep_from);
    len -= keep_from;
    scan_from = region_end - keep_from;
  }
}

Result<void> validate(const SearchRequest& r) {
  if (r.pattern.empty()) return fail(Errc::invalid_argument, "pattern is empty; pass the text or regex to look for");
  if (r.context_lines < 0 || r.context_lines > kMaxContextLines) {
    return fail(Errc::invalid_argument, fmt::format("context_lines must be between 0 and {}", kMaxContextLines));
  }
  if (r.max_results == 0) return fail(Errc::invalid_argument, "max_results must be at least 1");
  return {};
}

}  // namespace

Result<SearchResult> search(const Root& root, const SearchRequest& req, std::stop_token stop,
                            const SearchProgress& progress) {
  if (auto v = validate(req); !v) return std::unexpected(v.error());
  auto rel = root.relative(req.path.empty() ? "." : req.path);
  if (!rel) return std::unexpected(rel.error());
  auto matcher = Matcher::compile(req.pattern, {req.literal, req.case_sensitive});
  if (!matcher) return std::unexpected(matcher.error());
  std::optional<Glob> glob;
  if (!req.glob.empty()) {
    auto g = Glob::compile(req.glob);
    if (!g) return std::unexpected(g.error());
    glob = std::move(*g);
  }
  const size_t max = std::min(req.max_results, kMaxSearchResults);
  Collector collector(max);
  ScanParams params{*matcher, req.context_lines, req.read_chunk ? req.read_chunk : kDefaultChunk, max, collector, stop};
  std::atomic<size_t> scanned{0}, binary{0};

  auto scan_one = [&](int fd, std::string_view path, Worker& w) {
    std::vector<SearchMatch> hits;
    size_t seen = 0;
    Scan s = scan_file(fd, path, params, w, hits, seen);
    if (s == Scan::unreadable) return;
    scanned.fetch_add(1, std::memory_order_relaxed);
    if (s == Scan::binary) {
      binary.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    if (seen > 0) collector.add(std::string(path), std::move(hits), seen);
  };

  auto is_folder = is_folder_beneath(root, *rel, req.path);
  if (!is_folder) return std::unexpected(is_folder.error());
  if (!*is_folder) {
    // One named file is searched even when ignored or outside the glob: the caller asked for it.
    auto fd = root.open(*rel, O_RDONLY | O_NONBLOCK | O_NOCTTY);
    if (!fd) return std::unexpected(fd.error());
    Worker w(matcher->scratch());
    scan_one(fd->get(), *rel, w);
  } else {
    WalkOptions opts;
    opts.start = *rel;
    opts.include_ignored = req.include_ignored;
    if (progress) opts.on_tick = [&] { progress(scanned.load(std::memory_order_relaxed)); };
    std::vector<Worker> workers;
    for (unsigned i = 0, n = walk_thread_count(opts); i < n; ++i) workers.emplace_back(matcher->scratch());
    size_t start_len = rel->empty() ? 0 : rel->size() + 1;
    auto walked = walk(root, opts, stop, [&](const WalkEntry& e, unsigned worker) {
      if (e.type != EntryType::file) return;
      if (glob && !glob->matches(e.path) && !(start_len && glob->matches(e.path.substr(start_len)))) return;
      int fd = ::openat(e.dir_fd, e.name.data(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
      if (fd < 0) return;
      UniqueFd owner(fd);
      scan_one(fd, e.path, workers[worker]);
    });
    if (!walked) {
      if (walked.error().code == Errc::cancelled) {
        return fail(Errc::cancelled, fmt::format("search for '{}' was cancelled after {} files", req.pattern,
                                                 scanned.load()));
      }
      return std::unexpected(walked.error());
    }
  }
  if (stop.stop_requested()) return fail(Errc::cancelled, fmt::format("search for '{}' was cancelled", req.pattern));

  SearchResult out;
  collector.finish(out);
  out.files_scanned = scanned.load();
  out.binary_files_skipped = binary.load();
  return out;
}

}  // namespace kiln::workspace
