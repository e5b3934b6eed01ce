// `kiln verify` for people and CI: the same engine as the verify tool, with a progress display
// on a terminal, plain lines otherwise, --json for machines and --junit for CI test panels.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include <fmt/format.h>

#include "core/path_nesting.h"

#include "sandbox/manager.h"
#include "mcp/principal.h"
#include "runs/run_tracing.h"
#include "cli/commands.h"
#include "runs/verify_runner.h"
#include "traces/junit_writer.h"
#include "traces/trace_store.h"
#include "workspace/path_links.h"
#include "workspace/root.h"
#include "workspace/state_store.h"

namespace kiln::server {

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

int verify_command(const VerifyOptions& o, const std::string& state_dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::string ws = o.workspace.empty() ? fs::current_path(ec).string() : o.workspace;
  auto resolved = workspace::resolve_workspace_path(ws);
  if (!resolved) {
    std::fprintf(stderr, "kiln verify: %s\n", resolved.error().message.c_str());
    return 2;
  }
  ws = *resolved;
  auto root = workspace::Root::open_resolved(ws);
  if (!root) {
    std::fprintf(stderr, "kiln verify: %s\n", root.error().message.c_str());
    return 2;
  }
  // Before the folder is registered or a check runs: never the state directory, in it or around it.
  if (auto apart = check_apart_from_state_dir(root->path(), state_dir); !apart) {
    std::fprintf(stderr, "kiln verify: %s\n", apart.error().message.c_str());
    return 2;
  }
  // Ctrl-C cancels the running check (its whole tree is killed) and the rest; the result and the
  // trace still say what happened.
  std::stop_source stop = stop_on_termination_signals();

  auto state = workspace::StateStore::open(state_dir);
  if (!state) {
    std::fprintf(stderr, "kiln verify: %s\n", state.error().message.c_str());
    return 2;
  }
  bool created = false;
  auto rec = (*state)->open_workspace(root->path(), "", &created);
  if (!rec) {
    std::fprintf(stderr, "kiln verify: %s\n", rec.error().message.c_str());
    return 2;
  }
  auto trace_store = traces::TraceStore::open(state_dir);
  if (!trace_store) {
    std::fprintf(stderr, "kiln verify: %s\n", trace_store.error().message.c_str());
    return 2;
  }
  sandbox::ManagerOptions mo;
  mo.state_dir = state_dir;
  mo.helper_path = default_helper_path();
  sandbox::SandboxManager m(mo);
  RunTracer tracer(**trace_store, nullptr, &m);

  const bool tty = ::isatty(2);
  VerifyTarget target{rec->id, rec->name, std::make_shared<const workspace::Root>(std::move(*root)), state_dir};
  VerifyRequest req;
  req.only = o.checks;
  req.client = json{{"name", "kiln verify"}, {"version", KILN_VERSION}};
  req.principal = local_principal();  // the CLI acts as the local user
  req.stop = stop.get_token();
  req.progress = [tty, json_out = o.json](double, double, const std::string& msg) {
    if (json_out && !tty) return;
    if (tty) std::fprintf(stderr, "\033[2K\r\033[1m%s\033[0m\n", msg.c_str());
    else std::fprintf(stderr, "kiln verify: %s\n", msg.c_str());
  };
  if (o.verbose)
    req.live_output = [](const std::string&, bool is_stderr, std::string_view chunk) {
      std::fwrite(chunk.data(), 1, chunk.size(), is_stderr ? stderr : stdout);
    };
  auto result = run_verify(tracer, m, target, req);
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

}  // namespace kiln::server
