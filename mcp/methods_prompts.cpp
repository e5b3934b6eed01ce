// prompts/list and prompts/get: reusable agent workflows (fix_failing_checks).
#include <fmt/format.h>
#include <map>

#include "core/quote.h"
#include "protocol/errors.h"
#include "protocol/mcp_params.h"
#include "mcp/methods.h"

namespace kiln::server {

namespace {

using nlohmann::json;

const json& prompt_definitions() {
  static const json defs = json::array({{
      {"name", "fix_failing_checks"},
      {"title", "Fix failing checks"},
      {"description",
       "Run the workspace's checks with `verify`, read what failed from the traces, fix the code, and verify "
       "again until everything passes."},
      {"arguments",
       json::array({{{"name", "workspace"}, {"description", "Workspace id or name (default: the current one)"},
                     {"required", false}},
                    {{"name", "checks"}, {"description", "Comma-separated check names from kiln.json (default: all)"},
                     {"required", false}}})},
  }});
  return defs;
}

std::string fix_failing_checks_text(const std::map<std::string, std::string>& args) {
  auto get = [&](const char* k) {
    auto it = args.find(k);
    return it == args.end() ? std::string() : it->second;
  };
  std::string ws = get("workspace");
  std::string checks = get("checks");
  std::string scope = ws.empty() ? "the current workspace" : fmt::format("workspace \"{}\"", ws);
  std::string which = checks.empty() ? "all checks configured in kiln.json"
                                     : fmt::format("the checks {}", checks);
  std::string verify_args;
  if (!ws.empty()) verify_args += fmt::format("\"workspace\": \"{}\"", ws);
  if (!checks.empty()) {
    if (!verify_args.empty()) verify_args += ", ";
    verify_args += "\"checks\": [";
    std::string sep;
    for (std::size_t start = 0; start <= checks.size();) {
      auto comma = checks.find(',', start);
      std::string name = checks.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      while (!name.empty() && name.front() == ' ') name.erase(0, 1);
      while (!name.empty() && name.back() == ' ') name.pop_back();
      if (!name.empty()) {
        verify_args += sep + "\"" + name + "\"";
        sep = ", ";
      }
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    verify_args += "]";
  }
  return fmt::format(
      "Make {} pass in {}.\n\n"
      "1. Call `verify` with {{{}}} and read its result: each check has a status, an exit code, parsed test "
      "failures (name, message, file, line) and a trace_id.\n"
      "2. For every failing check, read the details with `trace_get` and `trace_output` (use `grep` to find the "
      "error lines) before changing anything.\n"
      "3. Read the relevant source with `file_read` and `file_search`; fix the cause, not the test, with "
      "`file_edit` (pass `if_sha256` from your read so you never overwrite a concurrent change).\n"
      "4. Call `verify` again. Repeat until the status is \"pass\", then summarise what was wrong and what you "
      "changed.",
      which, scope, verify_args);
}

}  // namespace

MethodResult prompts_list(MethodEnv&, const json& params) {
  auto cursor = protocol::cursor(params);
  if (!cursor) return std::unexpected(RpcError{protocol::kInvalidParams, cursor.error().message});
  if (*cursor) return std::unexpected(RpcError{protocol::kInvalidParams, "Invalid params: unknown cursor '" + **cursor + "'"});
  return json{{"prompts", prompt_definitions()}};
}

MethodResult prompts_get(MethodEnv&, const json& params) {
  auto p = protocol::decode_get_prompt(params);
  if (!p) return std::unexpected(RpcError{protocol::kInvalidParams, p.error().message});
  if (p->name != "fix_failing_checks") {
    return std::unexpected(RpcError{protocol::kInvalidParams, "Invalid params: unknown prompt '" + bounded(p->name) +
                                                                  "' (available: fix_failing_checks)"});
  }
  return json{{"description", prompt_definitions()[0]["description"]},
              {"messages", json::array({{{"role", "user"},
                                         {"content", {{"type", "text"}, {"text", fix_failing_checks_text(p->arguments)}}}}})}};
}

}  // namespace kiln::server
