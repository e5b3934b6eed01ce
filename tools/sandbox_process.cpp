// process_output, process_input, process_kill: following and steering a run (background or
// finished) by its run_id.
#include <fmt/format.h>

#include "sandbox/manager.h"
#include "mcp/session_state.h"
#include "tools/tools.h"
#include "tools/sandbox_common.h"

namespace kiln::server {

namespace {

using nlohmann::json;
namespace sbx = kiln::sandbox;

Result<ToolOutput> process_output(CallContext& ctx, sbx::SandboxManager& m, const json& args) {
  const std::string run_id = args.at("run_id");
  const std::string stream = args.at("stream");
  sbx::Stream s = stream == "stdout" ? sbx::Stream::stdout_ : stream == "stderr" ? sbx::Stream::stderr_ : sbx::Stream::both;
  auto page = m.output(ctx.session->principal(), run_id, s, args.at("offset").get<std::uint64_t>(),
                       args.at("limit").get<std::size_t>(), args.at("wait_ms").get<int>(), ctx.stop);
  if (!page) return std::unexpected(page.error());
  json out = {{"run_id", run_id},
              {"stream", stream},
              {"data", page->data},
              {"offset", page->offset},
              {"next_offset", page->next_offset},
              {"total_bytes", page->total_bytes},
              {"eof", page->eof},
              {"running", page->running},
              {"exit_code", page->exit_code ? json(*page->exit_code) : json(nullptr)},
              {"signal", page->signal ? json(page->signal) : json(nullptr)}};
  if (page->stop_reason) out["stop_reason"] = sbx::to_string(*page->stop_reason);
  return ToolOutput{std::move(out)};
}

Result<ToolOutput> process_input(CallContext& ctx, sbx::SandboxManager& m, const json& args) {
  const std::string run_id = args.at("run_id");
  const bool close = args.at("close");
  auto n = m.input(ctx.session->principal(), run_id, args.at("data").get<std::string>(), close);
  if (!n) return std::unexpected(n.error());
  return ToolOutput{json{{"run_id", run_id}, {"written", *n}, {"closed", close}}};
}

Result<ToolOutput> process_kill(CallContext& ctx, sbx::SandboxManager& m, const json& args) {
  const std::string run_id = args.at("run_id");
  const std::string name = args.at("signal");
  int sig = sbx::parse_signal(name);
  if (!sig) return fail(Errc::invalid_argument, fmt::format("unknown signal '{}': use KILL, TERM, INT, HUP, QUIT, USR1, USR2 or a number", name));
  auto r = m.kill(ctx.session->principal(), run_id, sig);
  if (!r) return std::unexpected(r.error());
  json out = {{"run_id", run_id}, {"running", !r->has_value()},
              {"stop_reason", r->has_value() ? sbx::to_string(**r) : "running"}};
  if (r->has_value()) {
    auto page = m.output(ctx.session->principal(), run_id, sbx::Stream::stdout_, 0, 1, 0);
    out["exit_code"] = page && page->exit_code ? json(*page->exit_code) : json(nullptr);
  }
  return ToolOutput{std::move(out)};
}

}  // namespace

void register_process_tools(ToolRegistry& registry, sbx::SandboxManager& m) {
  registry.add("process_output", redacting(m, process_output));
  registry.add("process_input", redacting(m, process_input));
  registry.add("process_kill", redacting(m, process_kill));
}

}  // namespace kiln::server
