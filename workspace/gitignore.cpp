// Parsing and matching of ignore files per gitignore(5); the common rule shapes ("name",
// "*.ext") take a fast path because every walked entry is checked against every rule in scope.
#include "workspace/gitignore.h"

#include "workspace/glob.h"

namespace kiln::workspace {

namespace {

bool has_wildcards(std::string_view s) { return s.find_first_of("*?[\\") != std::string_view::npos; }

// git drops trailing spaces unless a backslash escapes them.
std::string_view trim_trailing_spaces(std::string_view line) {
  size_t keep = 0;
  for (size_t i = 0; i < line.size(); ++i) {
    if (line[i] == '\\' && i + 1 < line.size()) {
      ++i;
      keep = i + 1;
    } else if (line[i] != ' ') {
      keep = i + 1;
    }
  }
  return line.substr(0, keep);
}

}  // namespace

IgnoreRules::IgnoreRules(std::string base) : base_(std::move(base)) {}

void IgnoreRules::add(std::string_view text) {
  if (text.starts_with("\xEF\xBB\xBF")) text.remove_prefix(3);
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    if (line.ends_with('\r')) line.remove_suffix(1);
    if (line.empty() || line.front() == '#') continue;
    line = trim_trailing_spaces(line);
    Rule r;
    if (line.starts_with('!')) {
      r.negate = true;
      line.remove_prefix(1);
    }
    if (line.ends_with('/')) {
      r.dir_only = true;
      while (line.ends_with('/')) line.remove_suffix(1);
    }
    r.anchored = line.find('/') != std::string_view::npos;
    while (line.starts_with('/')) line.remove_prefix(1);
    if (line.empty()) continue;
    r.pattern = std::string(line);
    if (!has_wildcards(line)) {
      r.kind = Rule::literal;
    } else if (!r.anchored && line.size() > 1 && line[0] == '*' && !has_wildcards(line.substr(1))) {
      r.kind = Rule::suffix;
      r.pattern.erase(0, 1);
    }
    rules_.push_back(std::move(r));
  }
}

bool IgnoreRules::matches(const Rule& r, std::string_view rel_to_base, std::string_view name) const {
  std::string_view subject = r.anchored ? rel_to_base : name;
  switch (r.kind) {
    case Rule::literal:
      return subject == r.pattern;
    case Rule::suffix:
      return subject.ends_with(r.pattern);
    case Rule::wild:
      break;
  }
  return wildmatch(r.pattern, subject);
}

IgnoreRules::Verdict IgnoreRules::match(std::string_view rel, bool is_dir) const {
  std::string_view rel_to_base = rel;
  if (!base_.empty()) {
    if (!(rel.size() > base_.size() && rel.starts_with(base_) && rel[base_.size()] == '/')) return Verdict::none;
    rel_to_base.remove_prefix(base_.size() + 1);
  }
  size_t slash = rel_to_base.rfind('/');
  std::string_view name = slash == std::string_view::npos ? rel_to_base : rel_to_base.substr(slash + 1);
  for (auto it = rules_.rbegin(); it != rules_.rend(); ++it) {
    if (it->dir_only && !is_dir) continue;
    if (matches(*it, rel_to_base, name)) return it->negate ? Verdict::included : Verdict::ignored;
  }
  return Verdict::none;
}

IgnoreChain::Ptr IgnoreChain::push(Ptr parent, IgnoreRules rules) {
  if (rules.empty()) return parent;
  return Ptr(new IgnoreChain(std::move(parent), std::move(rules)));
}

bool IgnoreChain::ignored(std::string_view rel, bool is_dir) const {
  for (const IgnoreChain* node = this; node; node = node->parent_.get()) {
    auto v = node->rules_.match(rel, is_dir);
    if (v != IgnoreRules::Verdict::none) return v == IgnoreRules::Verdict::ignored;
  }
  return false;
}

}  // namespace kiln::workspace
