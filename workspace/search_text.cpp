// UTF-8 validation and line clipping for search results (see search_text.h).
#include "workspace/search_text.h"

#include <algorithm>

namespace kiln::workspace {

namespace {

// Length of the valid UTF-8 sequence at p (n bytes available), or 0 if it is not one.
// Rejects overlong forms, surrogates and code points past U+10FFFF, as JSON parsers do.
size_t sequence_length(const unsigned char* p, size_t n) {
  unsigned char c = p[0];
  if (c < 0x80) return 1;
  auto cont = [&](size_t i) { return i < n && (p[i] & 0xC0) == 0x80; };
  if (c < 0xC2) return 0;
  if (c < 0xE0) return cont(1) ? 2 : 0;
  if (c < 0xF0) {
    if (n < 3 || !cont(2)) return 0;
    unsigned char lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
    return p[1] >= lo && p[1] <= hi ? 3 : 0;
  }
  if (c < 0xF5) {
    if (n < 4 || !cont(2) || !cont(3)) return 0;
    unsigned char lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
    return p[1] >= lo && p[1] <= hi ? 4 : 0;
  }
  return 0;
}

bool is_continuation(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

}  // namespace

bool valid_utf8(std::string_view s) {
  auto p = reinterpret_cast<const unsigned char*>(s.data());
  size_t n = s.size();
  for (size_t i = 0; i < n;) {
    if (p[i] < 0x80) {
      ++i;
      continue;
    }
    size_t len = sequence_length(p + i, n - i);
    if (len == 0) return false;
    i += len;
  }
  return true;
}

std::string sanitize_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  auto p = reinterpret_cast<const unsigned char*>(s.data());
  size_t n = s.size();
  for (size_t i = 0; i < n;) {
    size_t len = sequence_length(p + i, n - i);
    if (len == 0) {
      out += "\xEF\xBF\xBD";
      ++i;
    } else {
      out.append(s.data() + i, len);
      i += len;
    }
  }
  return out;
}

std::string clip_line(std::string_view line, size_t focus, size_t max_bytes) {
  if (line.size() <= max_bytes) return sanitize_utf8(line);
  size_t lead = max_bytes / 5;  // some text before the match, most after it
  size_t start = focus > lead ? focus - lead : 0;
  if (start + max_bytes > line.size()) start = line.size() - max_bytes;
  while (start < line.size() && is_continuation(line[start])) ++start;
  size_t end = std::min(line.size(), start + max_bytes);
  while (end < line.size() && end > start && is_continuation(line[end])) --end;
  std::string out;
  if (start > 0) out += "\xE2\x80\xA6";
  out += sanitize_utf8(line.substr(start, end - start));
  if (end < line.size()) out += "\xE2\x80\xA6";
  return out;
}

}  // namespace kiln::workspace
