// The wildmatch engine (git's algorithm, including its "**" and abort rules, which keep
// pathological patterns from going exponential) and the `glob` argument built on it.
#include "workspace/glob.h"

#include <cctype>
#include <cstring>

#include <fmt/format.h>

namespace kiln::workspace {

namespace {

enum MatchResult { kMatch, kNoMatch, kAbortAll, kAbortToStarStar };

bool class_matches(std::string_view name, unsigned char c) {
  if (name == "alnum") return std::isalnum(c);
  if (name == "alpha") return std::isalpha(c);
  if (name == "blank") return c == ' ' || c == '\t';
  if (name == "cntrl") return std::iscntrl(c);
  if (name == "digit") return std::isdigit(c);
  if (name == "graph") return std::isgraph(c);
  if (name == "lower") return std::islower(c);
  if (name == "print") return std::isprint(c);
  if (name == "punct") return std::ispunct(c);
  if (name == "space") return std::isspace(c);
  if (name == "upper") return std::isupper(c);
  if (name == "xdigit") return std::isxdigit(c);
  return false;
}

// Matches a bracket expression starting at p (just past '['); advances p to its closing ']'.
MatchResult match_bracket(const char*& p, const char* pe, unsigned char t) {
  bool negated = false;
  if (p < pe && (*p == '!' || *p == '^')) {
    negated = true;
    ++p;
  }
  bool matched = false;
  int prev = -1;  // the previous literal, which a following '-' turns into a range start
  for (bool first = true;; ++p, first = false) {
    if (p >= pe) return kAbortAll;  // unterminated: nothing can match
    unsigned char c = static_cast<unsigned char>(*p);
    if (c == ']' && !first) break;
    if (c == '\\') {
      if (++p >= pe) return kAbortAll;
      c = static_cast<unsigned char>(*p);
      if (c == t) matched = true;
      prev = c;
      continue;
    }
    if (c == '-' && prev >= 0 && p + 1 < pe && p[1] != ']') {
      ++p;
      unsigned char hi = static_cast<unsigned char>(*p);
      if (hi == '\\') {
        if (++p >= pe) return kAbortAll;
        hi = static_cast<unsigned char>(*p);
      }
      if (t >= prev && t <= hi) matched = true;
      prev = -1;
      continue;
    }
    if (c == '[' && p + 1 < pe && p[1] == ':') {
      const char* name = p + 2;
      const char* end = name;
      while (end + 1 < pe && !(end[0] == ':' && end[1] == ']')) ++end;
      if (end + 1 >= pe) return kAbortAll;
      if (class_matches(std::string_view(name, end - name), t)) matched = true;
      p = end + 1;
      prev = -1;
      continue;
    }
    if (c == t) matched = true;
    prev = c;
  }
  if (t == '/') return kNoMatch;
  return matched != negated ? kMatch : kNoMatch;
}

MatchResult dowild(const char* pstart, const char* p, const char* pe, const char* t, const char* te) {
  for (; p < pe; ++p, ++t) {
    char pc = *p;
    if (t == te && pc != '*') return kAbortAll;
    switch (pc) {
      case '\\':
        if (p + 1 < pe) pc = *++p;  // a trailing backslash matches itself
        [[fallthrough]];
      default:
        if (*t != pc) return kNoMatch;
        continue;
      case '?':
        if (*t == '/') return kNoMatch;
        continue;
      case '[': {
        ++p;
        MatchResult r = match_bracket(p, pe, static_cast<unsigned char>(*t));
        if (r != kMatch) return r;
        continue;
      }
      case '*': {
        bool match_slash = false;
        const char* first = p;
        while (p + 1 < pe && p[1] == '*') ++p;
        if (p != first) {
          // "**" is special only as a whole path component; elsewhere it is a plain '*'.
          if ((first == pstart || first[-1] == '/') && (p + 1 == pe || p[1] == '/')) {
            if (p + 1 < pe && p[1] == '/' && dowild(pstart, p + 2, pe, t, te) == kMatch) return kMatch;
            match_slash = true;
          }
        }
        ++p;
        if (p == pe) {
          if (!match_slash && std::memchr(t, '/', te - t)) return kAbortToStarStar;
          return kMatch;
        }
        for (; t < te; ++t) {
          MatchResult r = dowild(pstart, p, pe, t, te);
          if (r != kNoMatch) {
            if (!match_slash || r != kAbortToStarStar) return r;
          } else if (!match_slash && *t == '/') {
            return kAbortToStarStar;
          }
        }
        return kAbortAll;
      }
    }
  }
  return t == te ? kMatch : kNoMatch;
}

// Expands the first top-level {a,b,...} group and recurses; patterns without one pass through.
Result<void> expand_braces(const std::string& pattern, std::vector<std::string>& out) {
  constexpr size_t kMaxAlternatives = 256;
  size_t open = std::string::npos;
  int depth = 0;
  std::vector<size_t> commas;
  for (size_t i = 0; i < pattern.size(); ++i) {
    char c = pattern[i];
    if (c == '\\') {
      ++i;
      continue;
    }
    if (c == '[') {  // braces and commas inside a bracket expression are literal
      size_t j = i + 1;
      if (j < pattern.size() && (pattern[j] == '!' || pattern[j] == '^')) ++j;
      if (j < pattern.size() && pattern[j] == ']') ++j;
      while (j < pattern.size() && pattern[j] != ']') ++j;
      if (j < pattern.size()) i = j;
      continue;
    }
    if (c == '{') {
      if (depth++ == 0) open = i;
    } else if (c == '}' && depth > 0) {
      if (--depth == 0) {
        std::string head = pattern.substr(0, open);
        std::string tail = pattern.substr(i + 1);
        size_t start = open + 1;
        commas.push_back(i);
        for (size_t comma : commas) {
          auto r = expand_braces(head + pattern.substr(start, comma - start) + tail, out);
          if (!r) return r;
          start = comma + 1;
        }
        return {};
      }
    } else if (c == ',' && depth == 1) {
      commas.push_back(i);
    }
  }
  if (depth > 0) return fail(Errc::invalid_argument, fmt::format("glob '{}' has an unclosed '{{'", pattern));
  if (out.size() >= kMaxAlternatives) {
    return fail(Errc::invalid_argument, "glob expands to more than 256 alternatives; use fewer {a,b} groups");
  }
  out.push_back(pattern);
  return {};
}

}  // namespace

bool wildmatch(std::string_view pattern, std::string_view text) {
  const char* p = pattern.data();
  return dowild(p, p, p + pattern.size(), text.data(), text.data() + text.size()) == kMatch;
}

Result<Glob> Glob::compile(std::string_view pattern) {
  if (pattern.empty()) return fail(Errc::invalid_argument, "glob is empty; omit it to match every file");
  Glob g;
  g.source_ = std::string(pattern);
  std::vector<std::string> expanded;
  if (auto r = expand_braces(g.source_, expanded); !r) return std::unexpected(r.error());
  for (auto& alt : expanded) {
    std::string_view v = alt;
    while (v.starts_with("./")) v.remove_prefix(2);
    while (v.starts_with('/')) v.remove_prefix(1);
    while (v.size() > 1 && v.ends_with('/')) v.remove_suffix(1);
    if (v.empty()) continue;
    bool whole = v.find('/') != std::string_view::npos;
    g.alternatives_.push_back({std::string(v), whole});
  }
  if (g.alternatives_.empty()) return fail(Errc::invalid_argument, fmt::format("glob '{}' matches nothing", pattern));
  return g;
}

bool Glob::matches(std::string_view rel) const {
  size_t slash = rel.rfind('/');
  std::string_view base = slash == std::string_view::npos ? rel : rel.substr(slash + 1);
  for (const auto& alt : alternatives_) {
    if (wildmatch(alt.pattern, alt.whole_path ? rel : base)) return true;
  }
  return false;
}

}  // namespace kiln::workspace
