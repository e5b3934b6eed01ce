// The server the session and tool fuzzers talk to: every tool registered as in `kiln mcp`, over a
// state dir and a workspace in the fuzz scratch folder. Nothing can run or touch anything outside:
// the sandbox helper path names no file (every exec fails to start; unsandboxed runs are refused),
// stale-cgroup cleanup is off, $HOME is the scratch folder, and workspace_open refuses folders
// outside it (a guard of the harness, not of the product).
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "artifacts/artifact_store.h"
#include "workspace/checkpoint_store.h"
#include "fuzz/fuzz_support.h"
#include "sandbox/manager.h"
#include "services/service_host.h"
#include "runs/run_tracing.h"
#include "mcp/session.h"
#include "mcp/session_state.h"
#include "mcp/tool_registry.h"
#include "tools/tools.h"
#include "tools/publish.h"
#include "tools/trace_resources.h"
#include "runs/trace_hub.h"
#include "traces/trace_store.h"
#include "workspace/state_store.h"

namespace kiln::fuzz {

namespace fs = std::filesystem;

inline bool inside(const std::string& path, const std::string& base) {
  return path == base || path.starts_with(base + "/");
}

// Where a workspace_open path would land, without following it anywhere.
inline std::string landing(std::string path) {
  if (path == "~" || path.starts_with("~/")) path = scratch_dir() + path.substr(1);
  std::error_code ec;
  auto p = fs::weakly_canonical(path, ec);
  return ec ? std::string() : p.string();
}

struct ServerEnv {
  std::string scratch, state_dir, ws_dir;
  std::unique_ptr<workspace::StateStore> store;
  std::unique_ptr<sandbox::SandboxManager> sandboxes;
  std::unique_ptr<traces::TraceStore> traces;
  server::TraceHub hub;
  std::unique_ptr<server::RunTracer> tracer;
  std::unique_ptr<services::ServiceHost> service_host;
  std::unique_ptr<artifacts::ArtifactStore> artifacts;
  std::unique_ptr<workspace::CheckpointStore> checkpoints;
  server::ToolRegistry staging;  // the real handlers
  server::ToolRegistry registry; // the same, behind the harness guard
  server::ResourceProvider trace_family;  // kiln://trace/, as kiln mcp mounts it
  std::unique_ptr<server::ServerContext> ctx;

  // The workspace's files before every input: sources, a kiln.json with checks and reports, and
  // a report file for verify to read.
  void reset_workspace() const {
    std::error_code ec;
    for (auto& e : fs::directory_iterator(ws_dir, ec)) fs::remove_all(e.path(), ec);
    write_file(ws_dir + "/src/main.c", "int main(void) { return 0; }\n");
    write_file(ws_dir + "/README.md", "# demo\nhello world\nTODO: more\n");
    write_file(ws_dir + "/site/index.html", "<!doctype html><h1>hi</h1>\n");
    write_file(ws_dir + "/.gitignore", "build/\n*.o\n");
    write_file(ws_dir + "/reports/junit.xml",
               "<testsuite name=\"s\" tests=\"2\" failures=\"1\"><testcase name=\"a\"/><testcase name=\"b\">"
               "<failure message=\"boom\">at src/main.c:1</failure></testcase></testsuite>\n");
    write_file(ws_dir + "/kiln.json",
               R"({"verify": [{"name": "test", "run": "make test", "report": {"format": "junit", "path": "reports/junit.xml"}},)"
               R"( {"name": "lint", "run": ["true"], "on_failure": "continue"}], "publish": {"path": "site", "name": "demo"}})");
    // A way out for the resolver to refuse; the decoy behind it is checked after every input.
    fs::create_symlink("../outside", ws_dir + "/escape", ec);
  }

  void check_outside_untouched() const {
    std::size_t n = 0;
    for (auto& e : fs::directory_iterator(scratch + "/outside")) {
      (void)e;
      ++n;
    }
    std::ifstream in(scratch + "/outside/secret.txt");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (n != 1 || text != "decoy\n") violated("a tool changed the folder outside the workspace");
  }

  ServerEnv() {
    quiet_logs();
    scratch = scratch_dir();
    ::setenv("HOME", scratch.c_str(), 1);
    ::setenv("KILN_SANDBOX_HELPER", (scratch + "/no-such-helper/kiln-sandbox").c_str(), 1);
    state_dir = scratch + "/state";
    ws_dir = scratch + "/ws";
    fs::create_directories(ws_dir);
    write_file(scratch + "/outside/secret.txt", "decoy\n");
    reset_workspace();
    auto st = workspace::StateStore::open(state_dir);
    if (!st) violated("state store", st.error().message);
    store = std::move(*st);
    sandbox::ManagerOptions mo;
    mo.state_dir = state_dir;
    mo.helper_path = scratch + "/no-such-helper/kiln-sandbox";
    mo.allow_unsandboxed = false;
    mo.cleanup_stale = false;
    mo.warm_spares = false;
    mo.idle_timeout = std::chrono::seconds(5);
    sandboxes = std::make_unique<sandbox::SandboxManager>(mo);
    auto tr = traces::TraceStore::open(state_dir);
    if (!tr) violated("trace store", tr.error().message);
    traces = std::move(*tr);
    tracer = std::make_unique<server::RunTracer>(*traces, &hub, sandboxes.get());
    auto ar = artifacts::ArtifactStore::open(state_dir);
    if (!ar) violated("artifact store", ar.error().message);
    artifacts = std::move(*ar);
    auto cp = workspace::CheckpointStore::open(state_dir);
    if (!cp) violated("checkpoint store", cp.error().message);
    checkpoints = std::move(*cp);
    // As the real runtime wires them: neither owner collects a blob the other holds.
    artifacts->set_blob_referrer([this](const std::string& sha) { return checkpoints->references(sha); });
    checkpoints->set_blob_referrer([this](const std::string& sha) { return artifacts->references(sha); });
    tracer->set_checkpoints(checkpoints.get());

    server::register_workspace_tools(staging, sandboxes.get(), traces.get(), artifacts.get());
    server::register_file_tools(staging);
    server::register_search_tools(staging);
    service_host = std::make_unique<services::ServiceHost>(*sandboxes, tracer.get(), state_dir);
    server::register_sandbox_tools(staging, *sandboxes, tracer.get(), service_host.get());
    server::register_trace_tools(staging, *tracer, *sandboxes, service_host.get());
    server::register_publish_tools(staging, *tracer, *artifacts);
    server::register_app_tools(staging, *tracer, *artifacts);
    server::register_checkpoint_tools(staging, *checkpoints);
    staging.check_complete();
    for (const auto& def : staging.definitions()) {
      const std::string name = def["name"];
      const server::ToolHandler* real = &staging.find(name)->handler;
      registry.add_definition(def, [this, name, real](server::CallContext& c, const nlohmann::json& args)
                                       -> Result<server::ToolOutput> {
        if (name == "workspace_open" && args.contains("path") && args["path"].is_string() &&
            !inside(landing(args["path"].get<std::string>()), scratch)) {
          return fail(Errc::invalid_argument, "fuzz harness: only folders inside the scratch folder");
        }
        auto out = (*real)(c, args);
        if (c.session) {
          if (auto cur = c.session->current(); cur && !inside(cur->root->path(), scratch))
            violated("a workspace outside the scratch folder became current", cur->root->path());
        }
        return out;
      });
    }
    ctx = std::make_unique<server::ServerContext>(server::ServerContext{*store, registry, {}});
    ctx->options.worker_threads = 2;
    ctx->options.allow_unsandboxed = false;
    ctx->options.forward_process_logs = false;
    ctx->options.startup_workspace = ws_dir;
    trace_family = server::trace_resources(*traces, &hub);
    ctx->resources.push_back(&trace_family);
  }
};

// One per process, never destroyed (handlers may still hold references at exit, as in kiln).
inline ServerEnv& server_env() {
  static ServerEnv* env = new ServerEnv();
  return *env;
}

}  // namespace kiln::fuzz
