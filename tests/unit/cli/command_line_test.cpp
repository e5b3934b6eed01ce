// The `kiln` command line parsed through its command classes, without running the commands: where
// the shared options may go, what reaches `kiln run` after `--`, what is refused and with which code.
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <doctest/doctest.h>

#include "cli/artifacts_command.h"
#include "cli/command_line.h"
#include "cli/mcp_command.h"
#include "cli/publish_command.h"
#include "cli/run_command.h"
#include "cli/secret_command.h"
#include "cli/serve_command.h"
#include "cli/verify_command.h"
#include "mcp/logging.h"

namespace {

using kiln::cli::CommandLine;

struct Parsed {
  std::unique_ptr<CommandLine> cli = std::make_unique<CommandLine>();
  std::optional<int> exit;  // nullopt: a command is ready to run
  std::string out, err;

  std::string selected() const { return cli->selected() ? std::string(cli->selected()->name()) : std::string(); }
  template <class T>
  const T& command() const {
    auto* c = dynamic_cast<const T*>(cli->selected());
    REQUIRE(c != nullptr);
    return *c;
  }
};

Parsed parse(std::vector<std::string> args) {
  args.insert(args.begin(), "kiln");
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  Parsed p;
  std::ostringstream out, err;
  p.exit = p.cli->parse(int(argv.size()), argv.data(), out, err);
  p.out = out.str();
  p.err = err.str();
  return p;
}

// A command line that names each subcommand (and a sub-subcommand where one is required).
const std::vector<std::vector<std::string>> kEveryCommand = {
    {"mcp"},           {"serve"},          {"run", "--", "true"}, {"verify"},         {"publish"},
    {"traces", "list"}, {"artifacts", "list"}, {"secret", "list"},
};

}  // namespace

TEST_CASE("--state-dir and --log-level are taken before and after every subcommand's name") {
  for (const auto& cmd : kEveryCommand) {
    CAPTURE(cmd.front());
    std::vector<std::string> before = {"--state-dir", "/tmp/before", "--log-level", "debug"};
    before.insert(before.end(), cmd.begin(), cmd.end());
    auto b = parse(before);
    REQUIRE_FALSE(b.exit);
    CHECK(b.selected() == cmd.front());
    CHECK(b.cli->global().state_dir == "/tmp/before");
    CHECK(b.cli->global().log_level == "debug");

    // After the name (and before `--` for kiln run, whose command takes the rest).
    std::vector<std::string> after = {cmd.front(), "--state-dir", "/tmp/after", "--log-level", "error"};
    after.insert(after.end(), cmd.begin() + 1, cmd.end());
    auto a = parse(after);
    REQUIRE_FALSE(a.exit);
    CHECK(a.selected() == cmd.front());
    CHECK(a.cli->global().state_dir == "/tmp/after");
    CHECK(a.cli->global().log_level == "error");
  }
}

TEST_CASE("the shared options also follow a sub-subcommand, and the last one given wins") {
  auto p = parse({"--state-dir", "/tmp/first", "secret", "rm", "TOKEN", "--state-dir", "/tmp/last"});
  REQUIRE_FALSE(p.exit);
  CHECK(p.cli->global().state_dir == "/tmp/last");
  const auto& secret = p.command<kiln::cli::SecretCommand>();
  CHECK(secret.action() == "rm");
  CHECK(secret.secret_name() == "TOKEN");

  auto t = parse({"traces", "--state-dir", "/tmp/t", "show", "tr_1", "--log-level", "warning"});
  REQUIRE_FALSE(t.exit);
  CHECK(t.cli->global().state_dir == "/tmp/t");
  CHECK(t.cli->global().log_level == "warning");
}

TEST_CASE("kiln run: everything after -- is the command, even what looks like kiln's own options") {
  auto p = parse({"run", "--network", "loopback", "--env", "A=1", "--env", "B=2", "--", "sh", "-c", "echo hi",
                  "--network", "--state-dir", "x"});
  REQUIRE_FALSE(p.exit);
  const auto& o = p.command<kiln::cli::RunCommand>().options();
  CHECK(o.network == "loopback");
  CHECK(o.env == std::vector<std::string>{"A=1", "B=2"});
  CHECK(o.command == std::vector<std::string>{"sh", "-c", "echo hi", "--network", "--state-dir", "x"});
  CHECK(p.cli->global().state_dir.empty());

  auto none = parse({"run", "--"});
  CHECK(none.exit == int(CLI::ExitCodes::RequiredError));
  CHECK(none.err.find("command is required") != std::string::npos);
}

TEST_CASE("options reach their command: mcp, serve, verify") {
  auto m = parse({"mcp", "--workspace", "/w", "--max-message-bytes", "4096", "--sandbox-idle-s", "60",
                  "--max-sandboxes", "3", "--allow-unsandboxed"});
  REQUIRE_FALSE(m.exit);
  const auto& mo = m.command<kiln::cli::McpCommand>().options();
  CHECK(mo.workspace == "/w");
  CHECK(mo.stdio.max_message_bytes == 4096);
  CHECK(mo.sandbox_idle_s == 60);
  CHECK(mo.ceilings.max_sandboxes == 3);
  CHECK(mo.allow_unsandboxed);

  auto s = parse({"serve", "--mcp", "--listen", "127.0.0.1:0", "--session-idle-s", "5"});
  REQUIRE_FALSE(s.exit);
  const auto& so = s.command<kiln::cli::ServeCommand>().options();
  CHECK(so.mcp);
  CHECK(so.listen == "127.0.0.1:0");
  CHECK(so.session_idle_s == 5);
  CHECK_FALSE(so.daemon);

  auto v = parse({"verify", "lint", "test", "-w", "/ws", "--json", "--junit", "out.xml"});
  REQUIRE_FALSE(v.exit);
  const auto& vo = v.command<kiln::cli::VerifyCommand>().options();
  CHECK(vo.checks == std::vector<std::string>{"lint", "test"});
  CHECK(vo.workspace == "/ws");
  CHECK(vo.json);
  CHECK(vo.junit == "out.xml");
}

TEST_CASE("apps on the command line: kiln publish --app, kiln artifacts rm --delete-data") {
  auto p = parse({"publish", "app", "--app", "--name", "tracker"});
  REQUIRE_FALSE(p.exit);
  CHECK(p.command<kiln::cli::PublishCommand>().options().app);
  CHECK(p.command<kiln::cli::PublishCommand>().options().path == "app");
  auto plain = parse({"publish", "site"});
  REQUIRE_FALSE(plain.exit);
  CHECK_FALSE(plain.command<kiln::cli::PublishCommand>().options().app);
  auto rm = parse({"artifacts", "rm", "tracker", "--delete-data"});
  REQUIRE_FALSE(rm.exit);
  CHECK(rm.command<kiln::cli::ArtifactsCommand>().options().delete_data);
  CHECK(rm.command<kiln::cli::ArtifactsCommand>().options().name == "tracker");
  CHECK(parse({"artifacts", "show", "x", "--delete-data"}).exit.has_value());  // rm's flag only
}

TEST_CASE("--log-level takes what the log-level parser takes, before or after the name") {
  for (auto name : kiln::server::log_level_names()) {
    CAPTURE(name);
    CHECK_FALSE(parse({"--log-level", std::string(name), "mcp"}).exit);
    CHECK_FALSE(parse({"serve", "--log-level", std::string(name)}).exit);
  }
  for (const char* bad : {"bogus", "", "DEBUG"}) {
    CAPTURE(bad);
    CHECK_FALSE(kiln::server::parse_level(bad));
    auto p = parse({"--log-level", bad, "mcp"});
    CHECK(p.exit == int(CLI::ExitCodes::ValidationError));
    CHECK(p.err.find("not in {debug,info,notice,warning,error,critical,off}") != std::string::npos);
    CHECK(parse({"mcp", "--log-level", bad}).exit == int(CLI::ExitCodes::ValidationError));
  }
}

TEST_CASE("bad values and unknown words are refused before any command runs") {
  struct Case {
    std::vector<std::string> args;
    CLI::ExitCodes code;
  };
  const Case cases[] = {
      {{}, CLI::ExitCodes::RequiredError},                                      // no subcommand
      {{"bogus"}, CLI::ExitCodes::RequiredError},                               // not a subcommand
      {{"mcp", "--max-message-bytes", "10"}, CLI::ExitCodes::ValidationError},  // below 1 KiB
      {{"mcp", "--sandbox-idle-s", "0"}, CLI::ExitCodes::ValidationError},
      {{"mcp", "extra"}, CLI::ExitCodes::ExtrasError},
      {{"run", "--network", "bogus", "--", "true"}, CLI::ExitCodes::ValidationError},
      {{"run", "--timeout", "abc", "--", "true"}, CLI::ExitCodes::ConversionError},
      {{"serve", "--session-idle-s", "0"}, CLI::ExitCodes::ValidationError},
      {{"publish", "--share", "bogus"}, CLI::ExitCodes::ValidationError},
      {{"publish", "--expires-in", "-1"}, CLI::ExitCodes::ValidationError},
      {{"artifacts", "rm", "x", "--version", "0"}, CLI::ExitCodes::ValidationError},
      {{"secret"}, CLI::ExitCodes::RequiredError},
      {{"secret", "rm"}, CLI::ExitCodes::RequiredError},
      {{"--state-dir"}, CLI::ExitCodes::ArgumentMismatch},
  };
  for (const auto& c : cases) {
    CAPTURE(c.args.empty() ? std::string("(none)") : c.args.front());
    auto p = parse(c.args);
    CHECK(p.exit == int(c.code));
    CHECK(p.cli->selected() == nullptr);
    CHECK_FALSE(p.err.empty());
  }
}

TEST_CASE("--help of kiln and of each subcommand says what it does; --version names kiln") {
  auto top = parse({"--help"});
  CHECK(top.exit == 0);
  CHECK(top.out.find("--state-dir") != std::string::npos);
  for (const char* name : {"mcp", "run", "verify", "secret", "serve", "traces", "publish", "artifacts"})
    CHECK(top.out.find(std::string("  ") + name + " ") != std::string::npos);

  for (const char* name : {"mcp", "serve", "run", "verify", "publish", "traces", "artifacts", "secret"}) {
    CAPTURE(name);
    auto p = parse({name, "--help"});
    CHECK(p.exit == 0);
    CHECK(p.out.find("Exit: ") != std::string::npos);  // every footer states the exit codes
    CHECK(p.out.find("--state-dir") != std::string::npos);
    CHECK(p.out.find("--log-level") != std::string::npos);
  }

  auto v = parse({"--version"});
  CHECK(v.exit == 0);
  CHECK(v.out == std::string("kiln ") + KILN_VERSION + "\n");
}

TEST_CASE("a state directory that cannot be made ends each command with its own failure code") {
  struct Case {
    std::vector<std::string> args;
    int code;
  };
  // /proc refuses new folders, so secure_state_dir fails before the command would start.
  const Case cases[] = {
      {{"run", "--", "true"}, 125}, {{"verify"}, 2}, {{"mcp"}, 1}, {{"secret", "list"}, 1}, {{"publish"}, 1}};
  for (const auto& c : cases) {
    CAPTURE(c.args.front());
    std::vector<std::string> args = {"--state-dir", "/proc/self/no/such/dir"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    auto p = parse(args);
    REQUIRE_FALSE(p.exit);
    CHECK(p.cli->run() == c.code);
  }
}
