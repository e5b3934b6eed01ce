// The owning fd: a move hands the descriptor over, and only its last owner closes it, once.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <type_traits>
#include <utility>

#include "core/unique_fd.h"

using kiln::UniqueFd;

namespace {

bool is_open(int fd) { return ::fcntl(fd, F_GETFD) != -1; }

}  // namespace

static_assert(!std::is_copy_constructible_v<UniqueFd> && !std::is_copy_assignable_v<UniqueFd>,
              "a copy of an owning fd would close it twice");

TEST_CASE("UniqueFd: a move hands the descriptor over and the moved-from one closes nothing") {
  int p[2];
  REQUIRE(::pipe2(p, O_CLOEXEC) == 0);
  ::close(p[1]);
  UniqueFd first(p[0]);
  {
    UniqueFd second(std::move(first));
    CHECK(second.get() == p[0]);
    CHECK_FALSE(first);
    CHECK(first.get() == -1);
  }
  CHECK_FALSE(is_open(p[0]));
  // The number is free again: whoever takes it next must keep it while `first` goes away.
  int reused = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  REQUIRE(reused == p[0]);
  { UniqueFd gone(std::move(first)); }
  CHECK(is_open(reused));
  ::close(reused);
}

TEST_CASE("UniqueFd: move assignment closes what the target held") {
  int a = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  int b = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  REQUIRE((a >= 0 && b >= 0));
  UniqueFd x(a), y(b);
  x = std::move(y);
  CHECK_FALSE(is_open(a));
  CHECK(x.get() == b);
  CHECK(y.get() == -1);
  x = std::move(x);  // self-move keeps the descriptor
  CHECK(is_open(b));
}

TEST_CASE("UniqueFd: release gives the descriptor up, reset closes and takes another") {
  int a = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  int b = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  REQUIRE((a >= 0 && b >= 0));
  {
    UniqueFd x(a);
    int got = x.release();
    CHECK(got == a);
    CHECK_FALSE(x);
  }
  CHECK(is_open(a));
  UniqueFd y(a);
  y.reset(b);
  CHECK_FALSE(is_open(a));
  CHECK(y.get() == b);
  y.reset(b);  // taking the same number again must not close it
  CHECK(is_open(b));
  y.reset();
  CHECK_FALSE(is_open(b));
  CHECK(y.get() == -1);
}
