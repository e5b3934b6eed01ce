// Decodes TAP YAML diagnostic blocks well enough to pull out messages and locations; a full YAML
// parser would be a dependency for a handful of keys.
#include "traces/tap_yaml.h"

#include <algorithm>
#include <span>

#include "traces/report_common.h"

namespace kiln::traces::detail {
namespace {

constexpr int kMaxDepth = 4;

std::size_t indent_of(std::string_view line) {
  std::size_t n = 0;
  while (n < line.size() && (line[n] == ' ' || line[n] == '\t')) ++n;
  return n;
}

bool is_blank(std::string_view line) { return trim(line).empty(); }

// Child lines with the common indentation removed, joined by newlines.
std::string dedent(std::span<const std::string_view> lines) {
  std::size_t common = std::string_view::npos;
  for (auto l : lines) {
    if (!is_blank(l)) common = std::min(common, indent_of(l));
  }
  std::string out;
  for (auto l : lines) {
    if (!out.empty()) out.push_back('\n');
    if (!is_blank(l)) out.append(l.substr(common));
  }
  return std::string(trim(out));
}

std::string decode_single_quoted(std::string_view s) {
  std::string out;
  for (std::size_t i = 1; i < s.size(); ++i) {
    if (s[i] == '\'') {
      if (i + 1 < s.size() && s[i + 1] == '\'') {
        out.push_back('\'');
        ++i;
        continue;
      }
      break;
    }
    out.push_back(s[i]);
  }
  return out;
}

std::string decode_double_quoted(std::string_view s) {
  std::string out;
  for (std::size_t i = 1; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '"') break;
    if (c != '\\' || i + 1 >= s.size()) {
      out.push_back(c);
      continue;
    }
    switch (const char e = s[++i]) {
      case 'n': out.push_back('\n'); break;
      case 't': out.push_back('\t'); break;
      case 'r': out.push_back('\r'); break;
      case '0': out.push_back('\0'); break;
      case '"':
      case '\\':
      case '/': out.push_back(e); break;
      default:
        out.push_back('\\');
        out.push_back(e);
        break;
    }
  }
  return out;
}

// Quoted and plain scalars may continue on more-indented lines; YAML folds those into spaces.
std::string folded(std::string_view first, std::span<const std::string_view> more) {
  std::string out(first);
  for (auto l : more) {
    if (is_blank(l)) continue;
    out.push_back(' ');
    out.append(trim(l));
  }
  return out;
}

std::string block_scalar(char style, std::span<const std::string_view> children) {
  std::string text = dedent(children);
  if (style == '>') {
    for (std::size_t i = 0; i + 1 < text.size(); ++i) {
      if (text[i] == '\n' && text[i + 1] != '\n' && (i == 0 || text[i - 1] != '\n')) text[i] = ' ';
    }
  }
  return text;
}

void read_block(std::span<const std::string_view> lines, const std::string& prefix, YamlFields& out,
                int depth) {
  std::size_t base = std::string_view::npos;
  for (auto l : lines) {
    if (!is_blank(l)) {
      base = indent_of(l);
      break;
    }
  }
  if (base == std::string_view::npos) return;
  std::size_t i = 0;
  while (i < lines.size()) {
    const std::string_view line = lines[i];
    std::size_t next = i + 1;
    while (next < lines.size() && (is_blank(lines[next]) || indent_of(lines[next]) > base)) ++next;
    const auto children = lines.subspan(i + 1, next - i - 1);
    i = next;
    if (is_blank(line) || indent_of(line) != base) continue;

    const std::string_view content = line.substr(base);
    std::size_t colon = content.find(": ");
    if (colon == std::string_view::npos && content.ends_with(':')) colon = content.size() - 1;
    if (colon == std::string_view::npos || content.starts_with("- ")) continue;
    std::string key = prefix;
    key.append(trim(content.substr(0, colon)));
    const std::string_view rest = trim(content.substr(colon + 1));

    if (rest.empty()) {
      out.emplace_back(key, dedent(children));
      if (depth < kMaxDepth) read_block(children, key + ".", out, depth + 1);
    } else if (rest[0] == '|' || rest[0] == '>') {
      out.emplace_back(std::move(key), block_scalar(rest[0], children));
    } else if (rest[0] == '\'') {
      out.emplace_back(std::move(key), decode_single_quoted(folded(rest, children)));
    } else if (rest[0] == '"') {
      out.emplace_back(std::move(key), decode_double_quoted(folded(rest, children)));
    } else if (rest == "~" || rest == "null") {
      out.emplace_back(std::move(key), std::string());
    } else {
      out.emplace_back(std::move(key), folded(rest, children));
    }
  }
}

}  // namespace

YamlFields read_tap_yaml(const std::vector<std::string_view>& lines) {
  YamlFields out;
  read_block(lines, "", out, 0);
  return out;
}

std::string_view yaml_field(const YamlFields& fields, std::string_view key) {
  for (const auto& [k, v] : fields) {
    if (k == key) return v;
  }
  return {};
}

}  // namespace kiln::traces::detail
