// request_secret_page against the real thing: the kiln binary of this build serving a temp state
// directory in the foreground (skipped when the binary is not built). The answer's URL must open
// the page, a bad name comes back as invalid_argument with the server's sentence, a wrong token as io.
#include <doctest/doctest.h>

#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "../skip.h"
#include "../temp_dir.h"
#include "serve/blocking_http.h"
#include "serve/daemon.h"
#include "serve/secret_request.h"

extern char** environ;

namespace {

const std::string kKiln = KILN_TEST_BINARY_DIR "/kiln";

std::string no_kiln() {
  return std::filesystem::exists(kKiln) ? "" : kKiln + " is not built";
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

TEST_CASE("request_secret_page asks a running kiln serve for a page" *
          doctest::skip(kiln::test::skip_because("secret page client", no_kiln()))) {
  kiln::test::TempDir dir("kiln-secret-client");
  ::chmod(dir.path.c_str(), 0700);
  std::vector<std::string> args{kKiln, "serve", "--state-dir", dir.path, "--listen", "127.0.0.1:0"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  REQUIRE(::posix_spawn(&pid, kKiln.c_str(), nullptr, nullptr, argv.data(), environ) == 0);
  struct Stop {
    pid_t pid;
    ~Stop() {
      ::kill(pid, SIGTERM);
      int status = 0;
      ::waitpid(pid, &status, 0);
    }
  } stop{pid};
  // Called before serve.json names a live server, ensure_serve_running would start a daemon of
  // its own from this test binary: wait for it first.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  std::optional<kiln::server::ServeInfo> info;
  while (std::chrono::steady_clock::now() < deadline) {
    info = kiln::server::read_serve_info(dir.path);
    if (info && info->pid == pid) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  REQUIRE_MESSAGE((info && info->pid == pid), "kiln serve did not write serve.json");
  std::string token = slurp(dir.path + "/mcp-token");
  while (!token.empty() && token.back() == '\n') token.pop_back();
  REQUIRE(token.size() >= 32);

  auto page = kiln::server::request_secret_page(dir.path, token, "NPM_TOKEN", 10000);
  REQUIRE_MESSAGE(page, (page ? "" : page.error().message));
  CHECK(page->expires_in_s == 900);
  REQUIRE(page->url.starts_with(info->url + "/_kiln/secret/"));
  CHECK(page->url.size() == info->url.size() + std::string("/_kiln/secret/").size() + 64);
  kiln::server::BlockingRequest get;
  get.path = page->url.substr(info->url.size());
  auto opened = kiln::server::blocking_http(info->url, get);
  REQUIRE(opened);
  CHECK(opened->status == 200);
  CHECK(opened->body.find("NPM_TOKEN") != std::string::npos);

  auto bad = kiln::server::request_secret_page(dir.path, token, "not a name", 10000);
  REQUIRE_FALSE(bad);
  CHECK(bad.error().code == kiln::Errc::invalid_argument);
  CHECK(bad.error().message.find("not a secret name") != std::string::npos);

  auto wrong = kiln::server::request_secret_page(dir.path, std::string(64, 'f'), "NPM_TOKEN", 10000);
  REQUIRE_FALSE(wrong);
  CHECK(wrong.error().code == kiln::Errc::io);
}
