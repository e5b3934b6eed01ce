// file_edit: exact-text replacements applied all-or-nothing in memory, then written atomically,
// with errors that say where an ambiguous or missing old_text is so the agent can fix its call.
#include <algorithm>

#include <fmt/format.h>

#include "workspace/file_ops.h"
#include "workspace/file_ops_internal.h"
#include "workspace/unified_diff.h"

namespace kiln::workspace {

namespace {

std::string replace_all_of(std::string_view s, std::string_view from, std::string_view to) {
  std::string out;
  size_t pos = 0;
  for (;;) {
    size_t at = s.find(from, pos);
    if (at == std::string_view::npos) break;
    out.append(s.substr(pos, at - pos));
    out.append(to);
    pos = at + from.size();
  }
  out.append(s.substr(pos));
  return out;
}

// A file "uses CRLF" when most of its line breaks are CRLF; mixed files match as written.
bool uses_crlf(std::string_view s) {
  size_t lf = 0, crlf = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\n') continue;
    ++lf;
    if (i > 0 && s[i - 1] == '\r') ++crlf;
  }
  return crlf > 0 && crlf * 2 >= lf;
}

std::string to_file_endings(std::string_view s, bool crlf) {
  std::string lf = replace_all_of(s, "\r\n", "\n");
  return crlf ? replace_all_of(lf, "\n", "\r\n") : lf;
}

std::vector<size_t> find_all(std::string_view text, std::string_view needle) {
  std::vector<size_t> out;
  for (size_t pos = text.find(needle); pos != std::string_view::npos; pos = text.find(needle, pos + needle.size()))
    out.push_back(pos);
  return out;
}

size_t line_of(std::string_view text, size_t pos) {
  return 1 + static_cast<size_t>(std::count(text.begin(), text.begin() + static_cast<long>(pos), '\n'));
}

std::string_view trim(std::string_view s) {
  const char* ws = " \t\r\n";
  size_t b = s.find_first_not_of(ws);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

std::string list_lines(const std::vector<size_t>& lines) {
  std::string out;
  for (size_t i = 0; i < lines.size() && i < 20; ++i) {
    if (i) out += ", ";
    out += std::to_string(lines[i]);
  }
  if (lines.size() > 20) out += ", ...";
  return out;
}

// For old_text that matched nowhere: where its first non-blank line appears if whitespace is
// ignored, which is by far the most common reason for a miss.
std::string miss_hint(std::string_view text, std::string_view old_text) {
  std::string_view first;
  size_t pos = 0;
  while (pos <= old_text.size()) {
    size_t nl = old_text.find('\n', pos);
    std::string_view l = trim(old_text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos));
    if (!l.empty()) {
      first = l;
      break;
    }
    if (nl == std::string_view::npos) break;
    pos = nl + 1;
  }
  std::vector<size_t> near;
  if (!first.empty()) {
    size_t lineno = 1, start = 0;
    while (start <= text.size() && near.size() < 5) {
      size_t nl = text.find('\n', start);
      std::string_view l = text.substr(start, nl == std::string_view::npos ? std::string_view::npos : nl - start);
      if (trim(l) == first) near.push_back(lineno);
      if (nl == std::string_view::npos) break;
      start = nl + 1;
      ++lineno;
    }
  }
  if (!near.empty()) {
    return fmt::format("its first line appears, with different surrounding text or whitespace, at line {}; read "
                       "those lines again and copy old_text exactly (whitespace, indentation and line endings "
                       "matter)",
                       list_lines(near));
  }
  return "check whitespace, indentation and line endings, or read the file again: it may have changed";
}

}  // namespace

Result<EditResult> edit_file(const Root& root, const EditRequest& req) {
  auto rel = root.relative(req.path);
  if (!rel) return std::unexpected(rel.error());
  if (req.edits.empty()) return fail(Errc::invalid_argument, "edits is empty; pass at least one {old_text, new_text}");
  for (size_t i = 0; i < req.edits.size(); ++i) {
    if (req.edits[i].old_text.empty()) {
      return fail(Errc::invalid_argument,
                  fmt::format("edit {}: old_text is empty; quote the exact text to replace (to write a whole file, "
                              "use file_write)",
                              i + 1));
    }
  }
  auto target = detail::locate_for_write(root, req.path, false);
  if (!target) return std::unexpected(target.error());
  if (!target->exists)
    return fail(Errc::not_found, fmt::format("'{}' does not exist; use file_write to create it", req.path));
  auto before = detail::read_whole(target->parent.dir.get(), target->parent.name, req.path, kMaxEditBytes);
  if (!before) return std::unexpected(before.error());
  std::string before_sha = sha256_hex(*before);
  if (req.if_sha256 && !detail::same_sha256(*req.if_sha256, before_sha)) {
    return fail(Errc::conflict,
                fmt::format("'{}' changed since you read it (sha256 now {}); read it again and retry", req.path,
                            before_sha));
  }
  if (before->find('\0') != std::string::npos) {
    return fail(Errc::invalid_argument,
                fmt::format("'{}' is binary (it contains NUL bytes); file_edit changes text only, use file_write with "
                            "encoding \"base64\"",
                            req.path));
  }

  const bool crlf = uses_crlf(*before);
  std::string text = *before;
  std::uint64_t replacements = 0;
  for (size_t i = 0; i < req.edits.size(); ++i) {
    const Edit& e = req.edits[i];
    std::string old_norm = to_file_endings(e.old_text, crlf);
    std::string new_norm = to_file_endings(e.new_text, crlf);
    std::string_view old_text = old_norm, new_text = new_norm;
    auto hits = find_all(text, old_text);
    if (hits.empty() && old_norm != e.old_text) {
      // A mixed-ending file may hold the text exactly as the caller wrote it.
      hits = find_all(text, e.old_text);
      old_text = e.old_text;
      new_text = e.new_text;
    }
    std::string where = req.edits.size() > 1 ? fmt::format("edit {} of {}", i + 1, req.edits.size()) : "edit";
    std::string after_prev = i > 0 ? " (after the earlier edits were applied)" : "";
    if (hits.empty()) {
      return fail(Errc::not_found, fmt::format("{}: old_text was not found in '{}'{}; {}. Nothing was changed.", where,
                                               req.path, after_prev, miss_hint(text, e.old_text)));
    }
    if (hits.size() > 1 && !e.replace_all) {
      std::vector<size_t> lines;
      for (size_t h : hits) lines.push_back(line_of(text, h));
      return fail(Errc::conflict,
                  fmt::format("{}: old_text matches {} times in '{}'{} (at lines {}); include more surrounding lines "
                              "so it matches once, or pass replace_all: true to replace every one. Nothing was changed.",
                              where, hits.size(), req.path, after_prev, list_lines(lines)));
    }
    std::string next;
    next.reserve(text.size() + hits.size() * new_text.size());
    size_t pos = 0;
    for (size_t h : hits) {
      next.append(text, pos, h - pos);
      next.append(new_text);
      pos = h + old_text.size();
    }
    next.append(text, pos);
    text = std::move(next);
    replacements += hits.size();
  }

  EditResult out;
  out.path = *rel;
  out.diff = unified_diff(*before, text, *rel);
  out.sha256 = sha256_hex(text);
  out.replacements = replacements;
  if (!req.dry_run && text != *before) {
    auto written = detail::atomic_replace(target->parent, text, target->st.st_mode & 07777, req.path);
    if (!written) return std::unexpected(written.error());
  }
  out.applied = !req.dry_run;
  return out;
}

}  // namespace kiln::workspace
