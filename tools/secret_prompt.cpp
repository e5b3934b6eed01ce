// Asking the person for a missing secret through a one-time page of kiln serve.
#include "tools/secret_prompt.h"

#include <sodium.h>

#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "core/random_hex.h"
#include "mcp/http/token.h"
#include "mcp/session_state.h"
#include "protocol/mcp_era.h"
#include "sandbox/policy.h"
#include "sandbox/secrets.h"
#include "serve/secret_request.h"
#include "tools/sandbox_common.h"
#include "workspace/kiln_config.h"
#include "workspace/state_store.h"

namespace kiln::server {

namespace {

using nlohmann::json;
namespace sbx = kiln::sandbox;

constexpr int kPageRequestMs = 15000;
// The page lives 15 minutes; past that, waiting on is pointless.
constexpr auto kWaitForValue = std::chrono::minutes(15);

struct Missing {
  std::vector<std::string> names;
  std::string workspace;  // which folder asks: a repository's kiln.json can name any secret
  std::set<std::string> from_call;  // names the call's own `secrets` argument gave (else kiln.json's)
};

// The secrets the call's sandbox would need that neither the environment nor the store has.
Missing missing_secrets(CallContext& ctx, const json& args, bool policy_args) {
  auto ws = ctx.session->workspace_for(args);
  if (!ws) return {};  // the tool itself reports it
  LoadedConfig cfg = load_config(*(*ws)->root);
  sbx::PolicyInput in;
  in.config_sandbox = cfg.config.value("sandbox", json::object());
  if (policy_args) {
    for (const char* k : kPolicyArgs)
      if (args.contains(k)) in.args[k] = args[k];
  }
  in.workspace_root = (*ws)->root->path();
  in.workspace_id = (*ws)->id;
  auto policy = sbx::make_policy(in);
  if (!policy) return {};
  sbx::SecretStore store(ctx.session->store().dir());
  Missing missing;
  missing.workspace = (*ws)->root->path();
  if (policy_args && args.contains("secrets") && args["secrets"].is_array()) {
    for (const auto& n : args["secrets"])
      if (n.is_string()) missing.from_call.insert(n.get<std::string>());
  }
  for (const auto& name : policy->secrets) {
    auto found = store.resolve({name});
    if (!found && found.error().code == Errc::not_found) missing.names.push_back(name);
  }
  return missing;
}

std::string asked_by(const Missing& m, const std::string& name) {
  return fmt::format("a run in {} ({})", m.workspace,
                     m.from_call.contains(name) ? "the call's own secrets list" : "its kiln.json, sandbox.secrets");
}

std::string ask_message(const std::string& name, const std::string& workspace) {
  return fmt::format("A run in {1} needs the secret {0}, which Kiln does not have. If you trust that project with "
                     "it, open the link and type the value on Kiln's own page (kiln serve on this machine, an "
                     "address ending in /_kiln/secret/...): it goes into Kiln's secret store, is given to that "
                     "project's sandboxes by name, and is never shown to the assistant. You can also run "
                     "`kiln secret set {0}` in a terminal.", name, workspace);
}

std::string random_id() { return random_hex(16); }

// A page already handed out for the same secret of the same workspace is handed out again, not
// replaced: a client that keeps asking (a loop, a retry) must not void the page the person has
// open. Kept per process, until a minute before the page expires.
Result<SecretPageRequest> page_for(CallContext& ctx, const std::string& name, const Missing& m) {
  static std::mutex mu;
  static std::map<std::string, std::pair<SecretPageRequest, std::chrono::steady_clock::time_point>> handed_out;
  const std::string state_dir = ctx.session->store().dir();
  const std::string key = state_dir + '\n' + m.workspace + '\n' + name;
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard lock(mu);
  std::erase_if(handed_out, [&](const auto& kv) { return kv.second.second <= now; });
  if (auto it = handed_out.find(key); it != handed_out.end()) return it->second.first;
  auto token = ensure_default_token(state_dir);
  if (!token) return std::unexpected(token.error());
  auto page = request_secret_page(state_dir, *token, name, kPageRequestMs, asked_by(m, name));
  if (!page) {
    return fail(page.error().code, fmt::format("secret {} is not set and Kiln could not open a page to ask for it ({}); "
                                               "run `kiln secret set {}`", name, page.error().message, name));
  }
  handed_out[key] = {*page, now + std::chrono::seconds(std::max(0, page->expires_in_s - 60))};
  return page;
}

std::string declined_error(const std::string& name, const std::string& action) {
  return fmt::format("secret {} is not set: the person {} the page; run `kiln secret set {}` or call again", name,
                     action.empty() ? "did not answer for" : action == "decline" ? "declined" : "cancelled", name);
}

// Waits until the page stored `name` (the person is typing), with progress so a client's request
// timer keeps running; false on cancellation or after the page's lifetime.
Result<bool> wait_for_value(CallContext& ctx, const std::string& name) {
  sbx::SecretStore store(ctx.session->store().dir());
  auto deadline = std::chrono::steady_clock::now() + kWaitForValue;
  double ticks = 0;
  auto next_progress = std::chrono::steady_clock::now();
  while (!store.resolve({name})) {
    if (ctx.cancelled()) return false;
    if (std::chrono::steady_clock::now() > deadline) {
      return fail(Errc::not_found, fmt::format("secret {} was not typed on its page within 15 minutes; call again for "
                                               "a new page, or run `kiln secret set {}`", name, name));
    }
    if (ctx.progress && std::chrono::steady_clock::now() >= next_progress) {
      ctx.progress(++ticks, std::nullopt, "waiting for " + name + " to be typed on its page");
      next_progress = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return true;
}

// Legacy era: one elicitation per secret, each waited for until the page stored the value.
Result<std::optional<json>> ask_in_session(CallContext& ctx, const Missing& missing) {
  for (const auto& name : missing.names) {
    auto page = page_for(ctx, name, missing);
    if (!page) return std::unexpected(page.error());
    std::string elicitation_id = random_id();
    auto answer = ctx.ask_client("elicitation/create",
                                 json{{"mode", "url"}, {"elicitationId", elicitation_id}, {"url", page->url},
                                      {"message", ask_message(name, missing.workspace)}},
                                 std::chrono::minutes(15));
    if (ctx.cancelled()) return std::optional<json>();
    std::string action = answer && answer->is_object() ? answer->value("action", "") : "";
    if (action != "accept") return fail(Errc::not_found, declined_error(name, action));
    auto stored = wait_for_value(ctx, name);
    if (!stored) return std::unexpected(stored.error());
    if (!*stored) return std::optional<json>();  // cancelled: the tool sees it too
    if (ctx.notify) ctx.notify("notifications/elicitation/complete", json{{"elicitationId", elicitation_id}});
    spdlog::info("secret {} was typed on its page", name);
  }
  return std::optional<json>();
}

// Modern era (MRTR): the elicitations go back in the result. On the retry, a secret the person
// declined ends the call; one they accepted is waited for (the person may still be typing when
// the client calls again: accepting only means they agreed to open the page); only a secret the
// retry says nothing about gets a new page.
Result<std::optional<json>> ask_by_result(CallContext& ctx, const Missing& missing) {
  json requests = json::object();
  for (const auto& name : missing.names) {
    const std::string key = "kiln_secret_" + name;
    if (ctx.input_responses.contains(key)) {
      const json& r = ctx.input_responses[key];
      std::string action = r.is_object() && r.contains("action") && r["action"].is_string() ? r["action"].get<std::string>() : "";
      if (action != "accept") return fail(Errc::not_found, declined_error(name, action));
      auto stored = wait_for_value(ctx, name);
      if (!stored) return std::unexpected(stored.error());
      if (*stored) continue;
      return std::optional<json>();  // cancelled
    }
    auto page = page_for(ctx, name, missing);
    if (!page) return std::unexpected(page.error());
    requests[key] = {{"method", "elicitation/create"},
                     {"params", {{"mode", "url"}, {"url", page->url}, {"message", ask_message(name, missing.workspace)}}}};
  }
  if (requests.empty()) return std::optional<json>();
  return std::optional<json>(std::move(requests));
}

}  // namespace

ToolPreflight secret_preflight(bool policy_args) {
  return [policy_args](CallContext& ctx, const json& args) -> Result<std::optional<json>> {
    if (args.contains("sandbox_id") && args["sandbox_id"].is_string() && !args["sandbox_id"].get<std::string>().empty())
      return std::optional<json>();
    if (!ctx.session || !protocol::supports_url_elicitation(ctx.client_capabilities)) return std::optional<json>();
    if (!ctx.modern && !ctx.ask_client) return std::optional<json>();
    auto missing = missing_secrets(ctx, args, policy_args);
    if (missing.names.empty()) return std::optional<json>();
    if (sodium_init() < 0) return std::optional<json>();
    return ctx.modern ? ask_by_result(ctx, missing) : ask_in_session(ctx, missing);
  };
}

}  // namespace kiln::server
