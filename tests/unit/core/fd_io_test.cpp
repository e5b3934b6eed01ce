// The EINTR-safe loops: a signal that interrupts a blocked write (partly done, or before any byte)
// must not lose or repeat bytes, and reads stop at EOF or at the limit.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <string>
#include <thread>

#include "core/fd_io.h"
#include "core/proc_stat.h"
#include "core/unique_fd.h"

namespace {

std::atomic<int> g_signals{0};
void count_signal(int) { g_signals.fetch_add(1); }

std::string pattern(std::size_t n) {
  std::string s(n, '\0');
  for (std::size_t i = 0; i < n; ++i) s[i] = char('a' + (i * 7 + i / 4096) % 26);
  return s;
}

// Waits (without a clock) until the pipe read by `rd` is full and thread `tid`, which does
// nothing but write to it, sleeps: it is blocked in write(2) waiting for room.
void wait_until_blocked(pid_t tid, int rd) {
  const int capacity = ::fcntl(rd, F_GETPIPE_SZ);
  REQUIRE(capacity > 0);
  for (;;) {
    int queued = 0;
    REQUIRE(::ioctl(rd, FIONREAD, &queued) == 0);
    auto st = kiln::read_proc_stat(tid);
    REQUIRE(st);
    if (queued == capacity && st->state == 'S') return;
    std::this_thread::yield();
  }
}

}  // namespace

TEST_CASE("write_all: a signal interrupting a blocked write loses and repeats nothing") {
  // No SA_RESTART: the kernel returns a short count or EINTR instead of restarting the write.
  struct sigaction sa {}, old {};
  sa.sa_handler = count_signal;
  sigemptyset(&sa.sa_mask);
  REQUIRE(::sigaction(SIGUSR1, &sa, &old) == 0);

  int p[2];
  REQUIRE(::pipe2(p, O_CLOEXEC) == 0);
  kiln::UniqueFd rd(p[0]), wr(p[1]);
  const std::string data = pattern(1 << 20);  // many pipe buffers' worth

  std::atomic<pid_t> writer_tid{0};
  bool ok = false;
  int err = 0;
  std::thread writer([&] {
    writer_tid = pid_t(::syscall(SYS_gettid));
    ok = kiln::write_all(wr.get(), data);
    err = errno;
  });
  while (writer_tid.load() == 0) std::this_thread::yield();

  // Interrupt it three times while it waits for room: the first stops a write that has put some
  // bytes in (a short count), the next ones one that has put none (EINTR).
  for (int i = 1; i <= 3; ++i) {
    wait_until_blocked(writer_tid, rd.get());
    REQUIRE(::pthread_kill(writer.native_handle(), SIGUSR1) == 0);
    while (g_signals.load() < i) std::this_thread::yield();
  }
  std::string got;
  char buf[65536];
  while (got.size() < data.size()) {
    ssize_t n = kiln::read_some(rd.get(), buf, sizeof buf);
    REQUIRE(n > 0);
    got.append(buf, std::size_t(n));
  }
  writer.join();
  ::sigaction(SIGUSR1, &old, nullptr);
  CAPTURE(err);
  CHECK(ok);
  CHECK(g_signals.load() == 3);
  CHECK(got == data);
}

TEST_CASE("write_all: a closed reader is a failure with its errno") {
  struct sigaction ign {}, old {};
  ign.sa_handler = SIG_IGN;
  REQUIRE(::sigaction(SIGPIPE, &ign, &old) == 0);
  int p[2];
  REQUIRE(::pipe2(p, O_CLOEXEC) == 0);
  ::close(p[0]);
  kiln::UniqueFd wr(p[1]);
  errno = 0;
  bool ok = kiln::write_all(wr.get(), std::string_view("lost"));
  int err = errno;  // before doctest's own output can change it
  CHECK_FALSE(ok);
  CHECK(err == EPIPE);
  ::sigaction(SIGPIPE, &old, nullptr);
}

TEST_CASE("read_full and read_all: pieces up to EOF, and the limit") {
  int p[2];
  REQUIRE(::pipe2(p, O_CLOEXEC) == 0);
  kiln::UniqueFd rd(p[0]), wr(p[1]);
  std::thread writer([&] {
    for (const char* piece : {"one ", "two ", "three"}) CHECK(kiln::write_all(wr.get(), std::string_view(piece)));
    wr.reset();
  });
  char buf[64] = {};
  ssize_t n = kiln::read_full(rd.get(), buf, sizeof buf);
  writer.join();
  CHECK(std::string(buf, n > 0 ? std::size_t(n) : 0) == "one two three");

  REQUIRE(::pipe2(p, O_CLOEXEC) == 0);
  rd.reset(p[0]);
  wr.reset(p[1]);
  REQUIRE(kiln::write_all(wr.get(), std::string_view("0123456789")));
  wr.reset();
  std::string out;
  errno = 0;
  bool ok = kiln::read_all(rd.get(), out, 9);
  int err = errno;
  CHECK_FALSE(ok);
  CHECK(err == EFBIG);

  REQUIRE(::pipe2(p, O_CLOEXEC) == 0);
  rd.reset(p[0]);
  wr.reset(p[1]);
  REQUIRE(kiln::write_all(wr.get(), std::string_view("0123456789")));
  wr.reset();
  out.clear();
  CHECK(kiln::read_all(rd.get(), out, 10));
  CHECK(out == "0123456789");
}

TEST_CASE("pwrite_all and pread_full: at an offset, leaving the file position alone") {
  char path[] = "/tmp/kiln-fd-io-XXXXXX";
  kiln::UniqueFd f(::mkstemp(path));
  REQUIRE(f);
  ::unlink(path);
  REQUIRE(kiln::pwrite_all(f.get(), "world", 5, 6));
  REQUIRE(kiln::pwrite_all(f.get(), "hello ", 6, 0));
  CHECK(::lseek(f.get(), 0, SEEK_CUR) == 0);
  char buf[32] = {};
  CHECK(kiln::pread_full(f.get(), buf, sizeof buf, 0) == 11);
  CHECK(std::string(buf, 11) == "hello world");
  CHECK(kiln::pread_full(f.get(), buf, 3, 6) == 3);
  CHECK(std::string(buf, 3) == "wor");
}
