// The sandbox test fixture shared by the unit.sandbox files that run the real helper: a temporary
// state folder and workspace, a SandboxManager on them, and the skip rules (see manager_test.cpp).
#pragma once

#include <doctest/doctest.h>

#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "sandbox/manager.h"
#include "sandbox/policy.h"

#include "../skip.h"

namespace kiln::sandbox::test {

namespace fs = std::filesystem;

struct Env {
  std::string state, ws;
  std::unique_ptr<SandboxManager> m;
  std::string unavailable;  // why `true` did not run in a fresh sandbox; empty when it did
  Env(bool allow_unsandboxed = false) {
    char tmpl[] = "/tmp/kiln-sbx-test-XXXXXX";
    std::string base = ::mkdtemp(tmpl);
    state = base + "/state";
    ws = base + "/ws";
    fs::create_directories(state);
    fs::create_directories(ws);
    ManagerOptions o;
    o.state_dir = state;
    // KILN_SANDBOX_HELPER overrides the built helper, as it does for kiln (a broken one shows the skip).
    const char* helper = std::getenv("KILN_SANDBOX_HELPER");
    o.helper_path = helper != nullptr && *helper != '\0' ? helper : KILN_SANDBOX_HELPER;
    o.allow_unsandboxed = allow_unsandboxed;
    o.cleanup_stale = false;
    m = std::make_unique<SandboxManager>(o);
    // No REQUIRE on this path: the probe also runs before main (sandbox_skip), outside any case.
    auto p = try_policy();
    if (!p) {
      unavailable = p.error().message;
      return;
    }
    ExecRequest r;
    r.argv = {"/bin/sh", "-c", "true"};
    r.cwd = ws;
    if (auto probe = m->exec({}, &*p, r); !probe) unavailable = probe.error().message;
  }
  ~Env() {
    m.reset();
    std::error_code ec;
    fs::remove_all(fs::path(state).parent_path(), ec);
  }
  kiln::Result<SandboxPolicy> try_policy(nlohmann::json args = nlohmann::json::object()) {
    PolicyInput in;
    in.args = std::move(args);
    in.workspace_root = ws;
    in.workspace_id = "ws_test";
    auto p = make_policy(in);
    if (!p) return p;
    if (auto f = m->finalize_policy(*p); !f) return std::unexpected(f.error());
    return p;
  }
  SandboxPolicy policy(nlohmann::json args = nlohmann::json::object()) {
    auto p = try_policy(std::move(args));
    REQUIRE_MESSAGE(p.has_value(), (p ? "" : p.error().message));
    return *p;
  }
  kiln::Result<ExecResult> exec(const std::string& cmd, nlohmann::json args = nlohmann::json::object(),
                                const std::string& sb = {}, std::optional<double> timeout = {}) {
    auto p = policy(args);
    ExecRequest r;
    r.argv = {"/bin/sh", "-c", cmd};
    r.cwd = ws;
    r.timeout_s = timeout;
    return m->exec(sb, sb.empty() ? &p : nullptr, r);
  }
};

// Decided once, before any case runs (doctest applies decorators at registration, see skip.h):
// skip the cases that need a sandbox where none can start, unless KILN_REQUIRE_SANDBOX=1.
inline bool sandbox_skip() {
  static const bool skip = !kiln::test::sandbox_required() && kiln::test::skip_because(
      "unit.sandbox cases that need a sandbox (the sandbox helper cannot run here)", Env().unavailable);
  return skip;
}

// In a case that was not skipped: the sandbox must work (under KILN_REQUIRE_SANDBOX=1 this is where
// a helper that cannot start fails the case, with its reason).
#define REQUIRE_SANDBOX(e) REQUIRE_MESSAGE((e).unavailable.empty(), "the sandbox helper cannot run here: " << (e).unavailable)

}  // namespace kiln::sandbox::test
