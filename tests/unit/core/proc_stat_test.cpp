// The one /proc/<pid>/stat reader: fields after the last ')' (a command name may hold both), and
// what it says of this process and of a zombie.
#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "core/proc_stat.h"

using kiln::parse_proc_stat;

namespace {

// Fields 3..22 (and a few after) as the kernel prints them, after "pid (comm)".
std::string stat_line(const std::string& comm) {
  return "4242 (" + comm + ") S 17 4242 4200 34816 4242 4194560 1500 0 2 0 7 3 2 1 20 0 1 0 987654 12345678 900 "
                           "18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n";
}

}  // namespace

TEST_CASE("parse_proc_stat: a command name holding ') (' does not shift the fields") {
  for (std::string comm : {"sh", "a) (b", "x y", "((", "))", ") S 1 2 3 (", ""}) {
    CAPTURE(comm);
    auto st = parse_proc_stat(stat_line(comm));
    REQUIRE(st);
    CHECK(st->state == 'S');
    CHECK(st->ppid == 17);
    CHECK(st->pgrp == 4242);
    CHECK(st->session == 4200);
    CHECK(st->utime == 7);
    CHECK(st->stime == 3);
    CHECK(st->cutime == 2);
    CHECK(st->cstime == 1);
    CHECK(st->cpu_ticks() == 13);
    CHECK(st->start_time == 987654);
    CHECK_FALSE(st->gone());
  }
}

TEST_CASE("parse_proc_stat: zombies and dying processes are gone") {
  std::string z = stat_line("a) (b");
  z[z.rfind(')') + 2] = 'Z';
  REQUIRE(parse_proc_stat(z));
  CHECK(parse_proc_stat(z)->gone());
  z[z.rfind(')') + 2] = 'X';
  CHECK(parse_proc_stat(z)->gone());
}

TEST_CASE("parse_proc_stat: what is not a whole stat line is refused") {
  CHECK_FALSE(parse_proc_stat(""));
  CHECK_FALSE(parse_proc_stat("4242 sh S 17 4242"));            // no ')'
  CHECK_FALSE(parse_proc_stat("4242 (sh) S 17 4242 4200 0 0"));  // cut before the start time
  CHECK_FALSE(parse_proc_stat("4242 (sh) S x 4242 4200 34816 4242 4194560 1500 0 2 0 7 3 2 1 20 0 1 0 9"));
  CHECK_FALSE(parse_proc_stat("4242 (sh) SS 17 4242 4200 34816 4242 4194560 1500 0 2 0 7 3 2 1 20 0 1 0 9"));
}

TEST_CASE("read_proc_stat: this process, and a child that became a zombie") {
  auto self = kiln::read_proc_stat(::getpid());
  REQUIRE(self);
  CHECK(self->state == 'R');
  CHECK(self->ppid == ::getppid());
  CHECK(self->session == ::getsid(0));
  CHECK(self->start_time > 0);
  CHECK(kiln::process_start_time(::getpid()) == self->start_time);

  pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) ::_exit(0);
  siginfo_t info{};
  REQUIRE(::waitid(P_PID, id_t(child), &info, WEXITED | WNOWAIT) == 0);  // exited, not reaped
  auto zombie = kiln::read_proc_stat(child);
  REQUIRE(zombie);
  CHECK(zombie->state == 'Z');
  CHECK(zombie->ppid == ::getpid());
  CHECK_FALSE(kiln::process_start_time(child));
  REQUIRE(::waitpid(child, nullptr, 0) == child);
  CHECK_FALSE(kiln::read_proc_stat(child));
}
