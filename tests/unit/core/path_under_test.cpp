// path_under: the lexical "at or beneath" test the helper's mounts and Landlock rules rely on.
#include <doctest/doctest.h>

#include "core/path_under.h"

using kiln::path_under;

TEST_CASE("path_under: itself and what lies beneath, never a longer sibling name") {
  CHECK(path_under("/etc", "/etc"));
  CHECK(path_under("/etc/ssl/certs", "/etc"));
  CHECK(path_under("/etc/ssl/certs", "/etc/ssl"));
  CHECK_FALSE(path_under("/etcetera", "/etc"));
  CHECK_FALSE(path_under("/et", "/etc"));
  CHECK_FALSE(path_under("/etc", "/etc/ssl"));
  CHECK_FALSE(path_under("/usr/etc", "/etc"));
}

TEST_CASE("path_under: every absolute path is under the root") {
  CHECK(path_under("/", "/"));
  CHECK(path_under("/etc", "/"));
  CHECK(path_under("/home/a/b", "/"));
  CHECK_FALSE(path_under("relative/path", "/"));
}
