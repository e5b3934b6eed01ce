// Finding or starting the artifact server for a state directory. The daemon is a grandchild in its
// own session (setsid + double fork, no parent-death signal), so it survives the `kiln mcp` that
// started it; plain POSIX sockets for the health check keep Asio out of the MCP process's path.
#include "serve/daemon.h"

#include <fcntl.h>
#include <netdb.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/proc_stat.h"
#include "core/unique_fd.h"
#include "serve/blocking_http.h"

namespace kiln::server {
namespace {

constexpr const char* kDefaultListen = "127.0.0.1:7700";
constexpr auto kStartWait = std::chrono::seconds(5);

std::string canonical(const std::string& dir) {
  char buf[PATH_MAX];
  return ::realpath(dir.c_str(), buf) ? std::string(buf) : dir;
}

bool pid_alive(long pid) {
  if (pid <= 0 || ::kill(static_cast<pid_t>(pid), 0) != 0) return pid > 0 && errno == EPERM;
  auto stat = read_proc_stat(static_cast<pid_t>(pid));
  return !stat || !stat->gone();
}

// Whether nobody else holds HOST:PORT (a TIME_WAIT leftover does not count).
bool port_free(const std::string& listen) {
  auto colon = listen.rfind(':');
  if (colon == std::string::npos) return true;
  std::string host = listen.substr(0, colon), port = listen.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
  if (port == "0") return true;
  addrinfo hints{};
  hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* ai = nullptr;
  if (::getaddrinfo(host.c_str(), port.c_str(), &hints, &ai) != 0 || !ai) return true;
  UniqueFd s(::socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  int one = 1;
  ::setsockopt(s.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  bool in_use = ::bind(s.get(), ai->ai_addr, ai->ai_addrlen) != 0 && errno == EADDRINUSE;
  ::freeaddrinfo(ai);
  return !in_use;
}

std::string log_tail(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(std::move(l));
  std::string out;
  for (std::size_t i = lines.size() > 5 ? lines.size() - 5 : 0; i < lines.size(); ++i) out += "\n  " + lines[i];
  return out;
}

// Detached grandchild running `kiln serve --daemon`; returns its pid. Between fork and exec only
// async-signal-safe calls: the MCP process has threads.
Result<long> spawn_daemon(const std::string& state_dir, const std::string& listen) {
  char exe[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return fail(Errc::io, fmt::format("cannot find the kiln binary: {}", std::strerror(errno)));
  exe[n] = '\0';
  std::vector<std::string> args{exe, "serve", "--state-dir", state_dir, "--listen", listen, "--daemon"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::string log_path = state_dir + "/serve.log";
  UniqueFd devnull(::open("/dev/null", O_RDWR | O_CLOEXEC));
  UniqueFd log(::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600));
  if (devnull.get() < 0 || log.get() < 0) return fail(Errc::io, fmt::format("cannot open {}: {}", log_path, std::strerror(errno)));
  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) != 0) return fail(Errc::io, fmt::format("pipe: {}", std::strerror(errno)));
  UniqueFd rd(pipefd[0]), wr(pipefd[1]);
  pid_t child = ::fork();
  if (child < 0) return fail(Errc::io, fmt::format("fork: {}", std::strerror(errno)));
  if (child == 0) {
    ::setsid();
    pid_t grandchild = ::fork();
    if (grandchild != 0) {
      long g = grandchild;
      ssize_t ignored = ::write(wr.get(), &g, sizeof g);
      (void)ignored;
      ::_exit(grandchild > 0 ? 0 : 1);
    }
    // kiln mcp blocks the termination signals in every thread; the server must get them.
    sigset_t none;
    ::sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGPIPE, SIGCHLD}) ::sigaction(sig, &dfl, nullptr);
    ::dup2(devnull.get(), 0);
    ::dup2(devnull.get(), 1);
    ::dup2(log.get(), 2);
    if (::close_range(3, ~0U, 0) != 0) {
      for (int fd = 3; fd < 4096; ++fd) ::close(fd);
    }
    if (::chdir("/") != 0) ::_exit(126);
    ::execv(exe, argv.data());
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  wr.reset();
  long pid = 0;
  if (read_full(rd.get(), &pid, sizeof pid) != sizeof pid || pid <= 0) {
    return fail(Errc::io, "could not start kiln serve: the second fork failed");
  }
  return pid;
}

}  // namespace

std::optional<ServeInfo> read_serve_info(const std::string& state_dir) {
  std::ifstream in(state_dir + "/serve.json");
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  auto j = nlohmann::json::parse(ss.str(), nullptr, false);
  if (!j.is_object()) return std::nullopt;
  ServeInfo info;
  info.pid = j.value("pid", 0L);
  info.url = j.value("url", "");
  info.listen = j.value("listen", "");
  info.started_at = j.value("started_at", "");
  info.state_dir = j.value("state_dir", "");
  return info;
}

Result<void> write_serve_info(const std::string& state_dir, const ServeInfo& info) {
  nlohmann::json j{{"pid", info.pid},
                   {"url", info.url},
                   {"listen", info.listen},
                   {"started_at", info.started_at},
                   {"state_dir", info.state_dir}};
  std::string tmp = fmt::format("{}/serve.json.tmp.{}", state_dir, ::getpid());
  {
    UniqueFd f(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
    if (f.get() < 0) return fail(Errc::io, fmt::format("cannot write {}: {}", tmp, std::strerror(errno)));
    std::string text = j.dump(2) + "\n";
    if (!write_all(f.get(), text)) {
      ::unlink(tmp.c_str());
      return fail(Errc::io, fmt::format("cannot write {}: {}", tmp, std::strerror(errno)));
    }
  }
  if (::rename(tmp.c_str(), (state_dir + "/serve.json").c_str()) != 0) {
    ::unlink(tmp.c_str());
    return fail(Errc::io, fmt::format("cannot write {}/serve.json: {}", state_dir, std::strerror(errno)));
  }
  return {};
}

void remove_serve_info_if_ours(const std::string& state_dir, long pid) {
  auto info = read_serve_info(state_dir);
  if (info && info->pid == pid) ::unlink((state_dir + "/serve.json").c_str());
}

bool serve_answers(const std::string& url, const std::string& state_dir, int timeout_ms) {
  BlockingRequest req;
  req.path = "/healthz";
  req.timeout_ms = timeout_ms;
  auto resp = blocking_http(url, req);
  if (!resp || resp->status != 200) return false;
  auto j = nlohmann::json::parse(resp->body, nullptr, false);
  return j.is_object() && j.value("service", "") == "kiln-serve" &&
         canonical(j.value("state_dir", "")) == canonical(state_dir);
}

Result<std::string> ensure_serve_running(const std::string& state_dir_in) {
  ::mkdir(state_dir_in.c_str(), 0700);
  std::string state_dir = canonical(state_dir_in);
  UniqueFd lock(::open((state_dir + "/serve.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  if (lock.get() < 0) return fail(Errc::io, fmt::format("cannot open {}/serve.lock: {}", state_dir, std::strerror(errno)));
  while (::flock(lock.get(), LOCK_EX) != 0) {
    if (errno != EINTR) return fail(Errc::io, fmt::format("cannot lock {}/serve.lock: {}", state_dir, std::strerror(errno)));
  }
  auto old = read_serve_info(state_dir);
  if (old && pid_alive(old->pid) && serve_answers(old->url, state_dir, 1000)) return old->url;

  const char* env = std::getenv("KILN_SERVE_LISTEN");
  std::string listen = env && *env ? env : kDefaultListen;
  if (!port_free(listen)) listen = listen.substr(0, listen.rfind(':')) + ":0";  // someone else's port
  auto pid = spawn_daemon(state_dir, listen);
  if (!pid) return std::unexpected(pid.error());

  auto deadline = std::chrono::steady_clock::now() + kStartWait;
  while (std::chrono::steady_clock::now() < deadline) {
    auto info = read_serve_info(state_dir);
    if (info && info->pid == *pid && serve_answers(info->url, state_dir, 500)) return info->url;
    if (!pid_alive(*pid)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return fail(Errc::io, fmt::format("kiln serve (pid {}) did not answer on {} within 5 s; {}/serve.log ends:{}", *pid,
                                    listen, state_dir, log_tail(state_dir + "/serve.log")));
}

}  // namespace kiln::server
