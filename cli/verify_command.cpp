// `kiln verify` for people and CI: the same engine as the verify tool, with a progress display
// on a terminal, plain lines otherwise, --json for machines and --junit for CI test panels.
#include "cli/blob_owners.h"
#include "cli/verify_command.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/local_workspace.h"
#include "cli/process_setup.h"
#include "sandbox/manager.h"
#include "mcp/principal.h"
#include "runs/run_tracing.h"
#include "services/service_host.h"
#include "verify/verify_runner.h"
#include "traces/junit_writer.h"

namespace kiln::cli {

using nlohmann::json;

namespace {

void print_failures(const json& result, bool color) {
  const char* red = color ? "\033[31m" : "";
  const char* off = color ? "\033[0m" : "";
  for (const auto& c : result["checks"]) {
    if (c.contains("error")) std::fprintf(stderr, "  %s%s%s: %s\n", red, c["name"].get<std::string>().c_str(), off,
                                          c["error"].get<std::string>().c_str());
    if (!c["tests"].is_object()) continue;
    for (const auto& f : c["tests"].value("failures", json::array())) {
      std::string where = f.value("file", "");
      if (!where.empty() && f["line"].is_number()) where += ":" + f["line"].dump();
      std::string msg = f.value("message", "");
      if (auto nl = msg.find('\n'); nl != std::string::npos) msg = msg.substr(0, nl);
      std::fprintf(stderr, "  %sFAILED%s %s%s%s%s%s\n", red, off, f.value("name", "").c_str(), where.empty() ? "" : " at ",
                   where.c_str(), msg.empty() ? "" : ": ", msg.substr(0, 300).c_str());
    }
  }
}

}  // namespace

int run_verify_checks(const VerifyOptions& o, const std::string& state_dir) {
  auto local = open_local_workspace(o.workspace, state_dir);
  if (!local) {
    std::fprintf(stderr, "kiln verify: %s\n", local.error().message.c_str());
    return 2;
  }
  // Ctrl-C cancels the running check (its whole tree is killed) and the rest; the result and the
  // trace still say what happened.
  std::stop_source stop = stop_on_termination_signals();

  sandbox::ManagerOptions mo;
  mo.state_dir = state_dir;
  mo.helper_path = default_helper_path();
  sandbox::SandboxManager m(mo);
  server::RunTracer tracer(*local->traces, nullptr, &m);
  // What the verify changed goes in its trace, as it does for an agent's.
  auto owners = open_blob_owners(state_dir);
  if (owners) tracer.set_checkpoints(owners->checkpoints.get());
  services::ServiceHost services(m, &tracer, state_dir);

  const bool tty = ::isatty(2);
  server::VerifyTarget target{local->record.id, local->record.name,
                             std::make_shared<const workspace::Root>(std::move(local->root)), state_dir};
  server::VerifyRequest req;
  req.only = o.checks;
  req.client = json{{"name", "kiln verify"}, {"version", KILN_VERSION}};
  req.principal = server::local_principal();  // the CLI acts as the local user
  req.stop = stop.get_token();
  req.services = &services;
  req.progress = [tty, json_out = o.json](double, double, const std::string& msg) {
    if (json_out && !tty) return;
    if (tty) std::fprintf(stderr, "\033[2K\r\033[1m%s\033[0m\n", msg.c_str());
    else std::fprintf(stderr, "kiln verify: %s\n", msg.c_str());
  };
  if (o.verbose)
    req.live_output = [](const std::string&, bool is_stderr, std::string_view chunk) {
      std::fwrite(chunk.data(), 1, chunk.size(), is_stderr ? stderr : stdout);
    };
  auto result = server::run_verify(tracer, m, target, req);
  m.shutdown();
  if (!result) {
    std::fprintf(stderr, "kiln verify: %s\n", result.error().message.c_str());
    return 2;
  }
  const std::string status = (*result)["status"].get<std::string>();
  if (!o.junit.empty()) {
    std::ofstream f(o.junit, std::ios::binary | std::ios::trunc);
    f << traces::verify_to_junit(*result);
    if (!f) std::fprintf(stderr, "kiln verify: could not write %s\n", o.junit.c_str());
  }
  if (o.json) {
    std::printf("%s\n", result->dump(2).c_str());
  } else {
    if (status != "pass") print_failures(*result, tty);
    std::fprintf(stderr, "%s\ntrace: %s (kiln traces show %s)\n", (*result)["summary"].get<std::string>().c_str(),
                 (*result)["trace_id"].get<std::string>().c_str(), (*result)["trace_id"].get<std::string>().c_str());
  }
  return status == "pass" ? 0 : status == "fail" ? 1 : 2;
}

CLI::App& VerifyCommand::configure(CLI::App& app) {
  auto* verify = app.add_subcommand("verify", "Run the workspace's kiln.json checks in a sandbox (exit 0 only on pass)");
  verify->footer(
      "The checks are kiln.json's \"verify\" list, e.g. {\"verify\": [{\"name\": \"test\", \"run\": \"make test\"}]}; "
      "they run in order in one sandbox and are recorded as a trace (kiln traces show ID). "
      "Exit: 0 pass, 1 fail, 2 error.");
  verify->add_option("checks", options_.checks, "Check names (default: all, in kiln.json order)");
  verify->add_option("--workspace,-w", options_.workspace, "Workspace folder (default: the current directory)");
  verify->add_flag("--json", options_.json, "Print the result as JSON on stdout");
  verify->add_option("--junit", options_.junit, "Also write the result as a JUnit XML report to FILE");
  verify->add_flag("--verbose,-v", options_.verbose, "Stream each check's output");
  return *verify;
}

int VerifyCommand::run(const GlobalOptions& global) {
  if (!state_store_opens(global.state_dir)) return 2;
  return run_verify_checks(options_, global.state_dir);
}

}  // namespace kiln::cli
