// The `glob` argument and the wildmatch engine under it: basename vs whole-path patterns,
// "**", brace alternation, and the patterns that must be refused.
#include <doctest/doctest.h>

#include <string>

#include "workspace/glob.h"

using kiln::Errc;
using kiln::workspace::Glob;
using kiln::workspace::wildmatch;

TEST_CASE("wildmatch follows git's pathname rules") {
  CHECK(wildmatch("*.c", "a.c"));
  CHECK_FALSE(wildmatch("*.c", "dir/a.c"));  // '*' does not cross '/'
  CHECK(wildmatch("**/*.c", "a.c"));
  CHECK(wildmatch("**/*.c", "x/y/a.c"));
  CHECK(wildmatch("x/**", "x/y/z"));
  CHECK_FALSE(wildmatch("x/**", "x"));
  CHECK(wildmatch("a/**/z", "a/z"));
  CHECK(wildmatch("a/**/z", "a/b/c/z"));
  CHECK_FALSE(wildmatch("a?c", "a/c"));
  CHECK_FALSE(wildmatch("a[/]c", "a/c"));
  CHECK(wildmatch("a\\*c", "a*c"));
  CHECK_FALSE(wildmatch("a\\*c", "abc"));
  CHECK(wildmatch("[]]", "]"));
  CHECK(wildmatch("[a-]", "-"));
  CHECK_FALSE(wildmatch("[unterminated", "u"));
  CHECK(wildmatch("", ""));
  CHECK_FALSE(wildmatch("", "a"));
  // Many stars against a long non-matching text must finish quickly (the abort rules).
  CHECK_FALSE(wildmatch("*a*a*a*a*a*a*a*a*a*a*a*a*b", std::string(200, 'a')));
}

TEST_CASE("a glob without '/' matches the file name anywhere") {
  auto g = Glob::compile("*.cpp");
  REQUIRE(g);
  CHECK(g->matches("main.cpp"));
  CHECK(g->matches("src/deep/x.cpp"));
  CHECK_FALSE(g->matches("src/x.h"));
  CHECK_FALSE(g->matches("x.cpp/y.h"));

  auto t = Glob::compile("**/test_*");
  REQUIRE(t);
  CHECK(t->matches("test_a.py"));
  CHECK(t->matches("pkg/tests/test_b.py"));
  CHECK_FALSE(t->matches("pkg/contest_b.py"));
}

TEST_CASE("a glob with '/' matches the whole relative path") {
  auto g = Glob::compile("src/**/*.h");
  REQUIRE(g);
  CHECK(g->matches("src/a.h"));
  CHECK(g->matches("src/x/y/a.h"));
  CHECK_FALSE(g->matches("lib/a.h"));
  CHECK_FALSE(g->matches("other/src/a.h"));

  auto dot = Glob::compile("./src/*.c");
  REQUIRE(dot);
  CHECK(dot->matches("src/a.c"));
  CHECK_FALSE(dot->matches("src/x/a.c"));
}

TEST_CASE("brace alternation, nested, and literal braces inside classes") {
  auto g = Glob::compile("*.{h,cpp}");
  REQUIRE(g);
  CHECK(g->matches("a.h"));
  CHECK(g->matches("d/a.cpp"));
  CHECK_FALSE(g->matches("a.c"));

  auto mixed = Glob::compile("{src/*.c,*.md}");
  REQUIRE(mixed);
  CHECK(mixed->matches("src/a.c"));
  CHECK_FALSE(mixed->matches("lib/a.c"));
  CHECK(mixed->matches("docs/readme.md"));

  auto nested = Glob::compile("a{b,c{d,e}}");
  REQUIRE(nested);
  CHECK(nested->matches("ab"));
  CHECK(nested->matches("acd"));
  CHECK(nested->matches("ace"));
  CHECK_FALSE(nested->matches("ac"));

  auto cls = Glob::compile("x[{,]");
  REQUIRE(cls);
  CHECK(cls->matches("x{"));
  CHECK(cls->matches("x,"));
}

TEST_CASE("unusable globs are refused with a reason") {
  auto open = Glob::compile("*.{h,cpp");
  REQUIRE_FALSE(open);
  CHECK(open.error().code == Errc::invalid_argument);
  CHECK(open.error().message.find("unclosed") != std::string::npos);

  auto empty = Glob::compile("");
  REQUIRE_FALSE(empty);
  CHECK(empty.error().code == Errc::invalid_argument);

  auto blowup = Glob::compile("{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}");  // 512 alternatives
  REQUIRE_FALSE(blowup);
  CHECK(blowup.error().code == Errc::invalid_argument);
}
