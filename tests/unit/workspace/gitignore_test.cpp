// gitignore(5) rules as git applies them: a table of patterns against paths, then precedence
// between negations and between nested folders' files.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "workspace/gitignore.h"

using kiln::workspace::IgnoreChain;
using kiln::workspace::IgnoreRules;
using Verdict = kiln::workspace::IgnoreRules::Verdict;

namespace {

struct Case {
  const char* rules;
  const char* path;
  bool is_dir;
  Verdict expected;
};

Verdict check(const char* text, const char* path, bool is_dir, std::string base = {}) {
  IgnoreRules r(std::move(base));
  r.add(text);
  return r.match(path, is_dir);
}

}  // namespace

TEST_CASE("gitignore pattern table") {
  const Verdict I = Verdict::ignored, N = Verdict::none, K = Verdict::included;
  const std::vector<Case> cases = {
      // A name without a slash matches at any depth, files and folders alike.
      {"*.o", "a.o", false, I},
      {"*.o", "deep/er/b.o", false, I},
      {"*.o", "a.c", false, N},
      {"*.o", "a.o.c", false, N},
      {"build", "build", true, I},
      {"build", "src/build", false, I},
      {"build", "builds", false, N},
      // A leading slash anchors to the file's folder.
      {"/build", "build", true, I},
      {"/build", "src/build", true, N},
      // A trailing slash means folders only.
      {"out/", "out", true, I},
      {"out/", "sub/out", true, I},
      {"out/", "out", false, N},
      // A slash in the middle anchors too, and '*' does not cross '/'.
      {"doc/*.txt", "doc/a.txt", false, I},
      {"doc/*.txt", "doc/x/a.txt", false, N},
      {"doc/*.txt", "x/doc/a.txt", false, N},
      // "**" leading, trailing and in the middle.
      {"**/foo", "foo", false, I},
      {"**/foo", "a/b/foo", true, I},
      {"**/foo/bar", "x/foo/bar", false, I},
      {"**/foo/bar", "x/foo/baz/bar", false, N},
      {"abc/**", "abc/x", false, I},
      {"abc/**", "abc/x/y", false, I},
      {"abc/**", "abc", true, N},
      {"a/**/b", "a/b", false, I},
      {"a/**/b", "a/x/b", false, I},
      {"a/**/b", "a/x/y/b", false, I},
      {"a/**/b", "a/x/y/c", false, N},
      {"x**y", "x/y", false, N},  // not a whole component: an ordinary '*'
      {"x**y", "xaay", false, I},
      // ?, classes, ranges, negated classes, POSIX classes.
      {"?.txt", "a.txt", false, I},
      {"?.txt", "ab.txt", false, N},
      {"[abc].c", "b.c", false, I},
      {"[abc].c", "d.c", false, N},
      {"[!a].c", "b.c", false, I},
      {"[!a].c", "a.c", false, N},
      {"[0-9]*.log", "7days.log", false, I},
      {"[0-9]*.log", "x7.log", false, N},
      {"[[:upper:]]*", "Makefile", false, I},
      {"[[:upper:]]*", "makefile", false, N},
      // Comments, blank lines, escapes, trailing spaces, CRLF.
      {"# comment\n\n", "# comment", false, N},
      {"\\#file", "#file", false, I},
      {"\\!important", "!important", false, I},
      {"foo   ", "foo", false, I},
      {"foo\\ ", "foo ", false, I},
      {"foo\\ ", "foo", false, N},
      {"bar\r\n", "bar", false, I},
      {"\xEF\xBB\xBF" "bom", "bom", false, I},
      // Negation: the last matching rule wins.
      {"*.o\n!keep.o", "keep.o", false, K},
      {"*.o\n!keep.o", "other.o", false, I},
      {"!keep.o\n*.o", "keep.o", false, I},
      {"*\n!*/\n!*.c", "src", true, K},
      {"*\n!*/\n!*.c", "src/x.h", false, I},
      {"*\n!*/\n!*.c", "src/x.c", false, K},
      // Lone markers are no rules at all.
      {"/\n!\n", "x", false, N},
  };
  for (const auto& c : cases) {
    CAPTURE(c.rules);
    CAPTURE(c.path);
    CAPTURE(c.is_dir);
    CHECK(check(c.rules, c.path, c.is_dir) == c.expected);
  }
}

TEST_CASE("rules of a nested file apply beneath its folder, relative to it") {
  CHECK(check("/gen", "sub/gen", true, "sub") == Verdict::ignored);
  CHECK(check("/gen", "sub/x/gen", true, "sub") == Verdict::none);
  CHECK(check("gen", "sub/x/gen", true, "sub") == Verdict::ignored);
  CHECK(check("x/*.c", "sub/x/a.c", false, "sub") == Verdict::ignored);
  CHECK(check("x/*.c", "x/a.c", false, "sub") == Verdict::none);     // outside the folder
  CHECK(check("*", "subway/a", false, "sub") == Verdict::none);      // a prefix is not a parent
}

TEST_CASE("deeper files win over shallower ones, and silence defers to the parent") {
  IgnoreRules top("");
  top.add("*.log\nvendor/\n");
  IgnoreRules sub("sub");
  sub.add("!important.log\n");
  auto chain = IgnoreChain::push(IgnoreChain::push(nullptr, std::move(top)), std::move(sub));
  CHECK(chain->ignored("sub/important.log", false) == false);
  CHECK(chain->ignored("sub/other.log", false) == true);
  CHECK(chain->ignored("important.log", false) == true);
  CHECK(chain->ignored("sub/vendor", true) == true);
  CHECK(chain->ignored("sub/vendor", false) == false);
  CHECK(chain->ignored("sub/main.c", false) == false);
}

TEST_CASE("an empty rule set adds no link to the chain") {
  IgnoreRules top("");
  top.add("*.tmp");
  auto base = IgnoreChain::push(nullptr, std::move(top));
  IgnoreRules empty("sub");
  empty.add("# only a comment\n\n");
  CHECK(empty.empty());
  CHECK(IgnoreChain::push(base, std::move(empty)) == base);
}
