// Fuzzes argument decoding of every tool: tools/call params (protocol/mcp_params), validation
// against schemas/tools/NAME.json, then the tool's own handler with those arguments on a scratch
// workspace (fuzz_server_env.h: nothing can execute). The first line names the tool (an unknown
// name still picks one, by its hash); the rest is the arguments as JSON. A successful result must
// match the tool's outputSchema.
#include "fuzz/fuzz_server_env.h"
#include "protocol/json_schema.h"
#include "mcp/methods.h"
#include "mcp/principal.h"
#include "mcp/session_state.h"
#include "mcp/workspace_opening.h"

using nlohmann::json;
using kiln::fuzz::violated;
namespace srv = kiln::server;

namespace {

struct Harness {
  kiln::fuzz::ServerEnv& env = kiln::fuzz::server_env();
  srv::SessionState state{*env.store, srv::local_principal()};
  std::vector<json> defs = env.registry.definitions();
  Harness() {
    auto r = srv::open_workspace_folder(state, env.ws_dir, "fuzz", false);
    if (!r) violated("cannot open the fuzz workspace", r.error().message);
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static Harness h;
  std::string_view input(reinterpret_cast<const char*>(data), size);
  const auto nl = input.find('\n');
  if (nl == std::string_view::npos) return 0;
  const std::string wanted(input.substr(0, nl));
  const json* def = nullptr;
  for (const auto& d : h.defs)
    if (d["name"] == wanted) def = &d;
  if (!def) def = &h.defs[std::hash<std::string>{}(wanted) % h.defs.size()];
  const std::string name = (*def)["name"];
  json args = json::parse(input.substr(nl + 1), nullptr, false);
  if (args.is_discarded()) return 0;

  h.env.reset_workspace();
  // A previous input may have selected another workspace (workspace_open); start from the fuzz one.
  if (auto cur = h.state.current(); !cur || cur->root->path() != h.env.ws_dir)
    (void)srv::open_workspace_folder(h.state, h.env.ws_dir, "fuzz", false);

  srv::CallContext ctx;
  ctx.request_id = 1;
  ctx.session = &h.state;
  ctx.progress = [](double, std::optional<double>, std::string_view) {};
  ctx.log = [](std::string_view, std::string_view) {};
  static const json no_capabilities = json::object();
  srv::MethodEnv menv{*h.env.ctx, h.state, ctx, false, no_capabilities, nullptr,
                      [](const std::string&, bool) {}, [](const std::string&) {}};
  json params = {{"name", name}, {"arguments", args}};
  srv::MethodResult r;
  try {
    r = srv::tools_call(menv, params);
  } catch (const std::exception& e) {
    // The session would turn this into -32603 "Internal error": a handler that trusts arguments
    // the schema let through.
    violated("a tool handler threw", name + ": " + e.what() + " for " + args.dump().substr(0, 500));
  }
  if (r) {
    const json& res = *r;
    if (!res.contains("content") || !res["content"].is_array() || !res.contains("isError") || !res["isError"].is_boolean())
      violated("tools/call result shape", res.dump());
    if (!res["isError"].get<bool>()) {
      if (auto bad = kiln::protocol::validate((*def)["outputSchema"], res["structuredContent"]))
        violated("result does not match the outputSchema", name + ": " + kiln::protocol::to_string(*bad) + ": " +
                                                               res["structuredContent"].dump().substr(0, 1000));
    }
  } else if (args.is_object()) {
    // Arguments that are an object never make tools/call a protocol error for a known tool.
    violated("JSON-RPC error for an object of arguments", name + ": " + r.error().message);
  }
  h.env.check_outside_untouched();
  return 0;
}
