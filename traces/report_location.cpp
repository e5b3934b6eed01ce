// Digs "where did it fail" out of free-form failure text, because most runners put the file and
// line only inside a stack trace or an assertion message, never in a field of their own.
#include <cctype>

#include "traces/report_common.h"

namespace kiln::traces::detail {
namespace {

constexpr std::size_t kMaxScanBytes = 64 * 1024;

bool is_digit(char c) { return c >= '0' && c <= '9'; }

bool stops_path(char c) {
  constexpr std::string_view kStops = " \t\r\n()\"'<>`[]{},=";
  return kStops.find(c) != std::string_view::npos;
}

// A source file has a short alphanumeric extension; this keeps "4 !== 5", times like 12:30 and
// node's extension-less "node:internal/..." frames from passing as locations.
bool looks_like_source_file(std::string_view path) {
  const auto slash = path.find_last_of("/\\");
  std::string_view base = slash == std::string_view::npos ? path : path.substr(slash + 1);
  const auto dot = base.rfind('.');
  if (dot == std::string_view::npos || dot + 1 >= base.size()) return false;
  std::string_view ext = base.substr(dot + 1);
  if (ext.size() > 10 || !std::isalpha(static_cast<unsigned char>(ext[0]))) return false;
  for (char c : ext) {
    if (!std::isalnum(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

// Frames in the runtime or in dependencies are where an error surfaced, not what to fix.
bool is_library_path(std::string_view path) {
  return path.starts_with("node:") || path.starts_with("internal/") ||
         path.find("node_modules/") != std::string_view::npos ||
         path.find("/site-packages/") != std::string_view::npos ||
         path.find("/dist-packages/") != std::string_view::npos ||
         path.find("/lib/python") != std::string_view::npos;
}

std::string_view strip_file_url(std::string_view path) {
  if (path.starts_with("file://")) path.remove_prefix(7);
  return path;
}

struct Best {
  std::optional<SourceLocation> first_user, first_any, last_python_user;

  void offer(std::string_view path, std::optional<int> line, bool python) {
    path = strip_file_url(path);
    if (path.empty() || !line) return;
    const bool library = is_library_path(path);
    SourceLocation loc{std::string(path), line};
    if (python) {
      if (!library) last_python_user = loc;
    } else if (!library && !first_user) {
      first_user = loc;
    }
    if (!first_any) first_any = std::move(loc);
  }
};

std::optional<int> leading_number(std::string_view s) {
  std::size_t n = 0;
  while (n < s.size() && is_digit(s[n])) ++n;
  return parse_line_number(s.substr(0, n));
}

// Python: File "/x/test_y.py", line 12, in test_z
void scan_python(std::string_view line, Best& best) {
  constexpr std::string_view kFile = "File \"";
  constexpr std::string_view kLine = "\", line ";
  const auto f = line.find(kFile);
  if (f == std::string_view::npos) return;
  const auto path_start = f + kFile.size();
  const auto l = line.find(kLine, path_start);
  if (l == std::string_view::npos) return;
  best.offer(line.substr(path_start, l - path_start), leading_number(line.substr(l + kLine.size())), true);
}

// Perl: "at t/math.t line 8."
void scan_perl(std::string_view line, Best& best) {
  constexpr std::string_view kLine = " line ";
  for (auto pos = line.find(kLine); pos != std::string_view::npos; pos = line.find(kLine, pos + 1)) {
    std::size_t start = pos;
    while (start > 0 && line[start - 1] != ' ' && line[start - 1] != '\t') --start;
    if (start < 3 || line.substr(start - 3, 3) != "at ") continue;
    if (start > 3 && line[start - 4] != ' ' && line[start - 4] != '\t') continue;
    std::string_view path = line.substr(start, pos - start);
    if (looks_like_source_file(path)) {
      best.offer(path, leading_number(line.substr(pos + kLine.size())), false);
    }
  }
}

// Everything else: path:12, path:12:5, (file:///x.mjs:14:10), path(12), path(12,5).
void scan_generic(std::string_view line, Best& best) {
  for (std::size_t i = 1; i + 1 < line.size(); ++i) {
    const char c = line[i];
    if ((c != ':' && c != '(') || !is_digit(line[i + 1])) continue;
    std::size_t end = i + 1;
    while (end < line.size() && is_digit(line[end])) ++end;
    const char after = end < line.size() ? line[end] : '\n';
    const bool ok_after = c == ':' ? (after == ':' || after == ')' || after == ',' || after == '.' ||
                                      after == ' ' || after == '\t' || after == '\r' || after == '\n')
                                   : (after == ')' || after == ',');
    if (!ok_after) continue;
    std::size_t start = i;
    while (start > 0 && !stops_path(line[start - 1])) --start;
    std::string_view path = line.substr(start, i - start);
    if (!looks_like_source_file(path)) continue;
    best.offer(path, parse_line_number(line.substr(i + 1, end - i - 1)), false);
    i = end;
  }
}

}  // namespace

std::optional<SourceLocation> find_source_location(std::string_view text) {
  text = text.substr(0, kMaxScanBytes);
  Best best;
  while (!text.empty()) {
    const auto nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    scan_python(line, best);
    scan_perl(line, best);
    scan_generic(line, best);
  }
  if (best.last_python_user) return best.last_python_user;
  if (best.first_user) return best.first_user;
  return best.first_any;
}

}  // namespace kiln::traces::detail
