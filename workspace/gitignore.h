// .gitignore semantics (git's documented rules) so listing and searching hide what the project
// itself considers noise. Rules are grouped per folder and chained, so a walker shares its
// parent's chain with every subfolder and only extends it where an ignore file exists.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::workspace {

// The rules of one folder: its .gitignore, its .ignore and, at the workspace root,
// .git/info/exclude, concatenated in ascending precedence (the last matching rule wins).
class IgnoreRules {
 public:
  enum class Verdict { none, ignored, included };

  // `base` is the folder holding the file, relative to the workspace root ("" for the root).
  explicit IgnoreRules(std::string base = {});

  // Appends the rules of one file's text (comments, blank lines, escapes, negation...).
  void add(std::string_view text);

  // `rel` is relative to the workspace root and lies beneath `base`.
  Verdict match(std::string_view rel, bool is_dir) const;

  bool empty() const { return rules_.empty(); }
  const std::string& base() const { return base_; }

 private:
  struct Rule {
    std::string pattern;   // with '!', the anchoring '/' and the trailing '/' removed
    bool negate = false;
    bool dir_only = false;
    bool anchored = false;  // had a '/' before its end: matches the path relative to base
    enum Kind { literal, suffix, wild } kind = wild;  // literal/suffix skip wildmatch ("name", "*.ext")
  };
  bool matches(const Rule& r, std::string_view rel_to_base, std::string_view name) const;

  std::string base_;
  std::vector<Rule> rules_;
};

// Rules of nested folders, deepest last. Immutable once built, so walker threads share it.
class IgnoreChain {
 public:
  using Ptr = std::shared_ptr<const IgnoreChain>;

  // Returns `parent` unchanged when `rules` is empty, so rule-less folders cost nothing.
  static Ptr push(Ptr parent, IgnoreRules rules);

  // Deeper folders' rules win over shallower ones. Callers must not ask about a path whose
  // parent folder is itself ignored: git never re-includes beneath an excluded folder, and the
  // walker honours that by not descending.
  bool ignored(std::string_view rel, bool is_dir) const;

 private:
  IgnoreChain(Ptr parent, IgnoreRules rules) : parent_(std::move(parent)), rules_(std::move(rules)) {}
  Ptr parent_;
  IgnoreRules rules_;
};

}  // namespace kiln::workspace
