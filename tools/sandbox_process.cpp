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
  std::string run_id = args.value("run_id", "");
  std::string stream = args.value("stream", "both");
  sbx::Stream s = stream == "stdout" ? sbx::Stream::stdout_ : stream == "stderr" ? sbx::Stream::stderr_ : sbx::Stream::both;
  auto page = m.output(ctx.session->principal(), run_id, s, args.value("offset", std::uint64_t{0}), args.value("limit", std::size_t{65536}),
                       args.value("wait_ms", 0), ctx.stop);
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
  std::string summary = fmt::format("{}: bytes {}-{} of {} ({}){}", run_id, page->offset, page->next_offset,
                                    page->total_bytes, stream,
                                    page->running ? ", still running" : page->eof ? ", ended, all read" : ", ended");
  return ToolOutput{std::move(out), std::move(summary)};
}

Result<ToolOutput> process_input(CallContext& ctx, sbx::SandboxManager& m, const json& args) {
  std::string run_id = args.value("run_id", "");
  bool close = args.value("close", false);
  auto n = m.input(ctx.session->principal(), run_id, args.value("data", ""), close);
  if (!n) return std::unexpected(n.error());
  return ToolOutput{json{{"run_id", run_id}, {"written", *n}, {"closed", close}},
                    fmt::format("Wrote {} bytes to {}{}", *n, run_id, close ? " and closed its stdin" : "")};
}

Result<ToolOutput> process_kill(CallContext& ctx, sbx::SandboxManager& m, const json& args) {
  std::string run_id = args.value("run_id", "");
  std::string name = args.value("signal", "KILL");
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
  return ToolOutput{std::move(out), r->has_value() ? fmt::format("{} stopped: {}", run_id, sbx::to_string(**r))
                                                   : fmt::format("Sent {} to {}; it is still running", name, run_id)};
}

}  // namespace

void register_process_tools(ToolRegistry& registry, sbx::SandboxManager& m) {
  registry.add("process_output", redacting(m, process_output));
  registry.add("process_input", redacting(m, process_input));
  registry.add("process_kill", redacting(m, process_kill));
}

}  // namespace kiln::server
