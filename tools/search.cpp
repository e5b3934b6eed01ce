// file_list and file_search: thin handlers that decode arguments (already validated against
// schemas/tools/file_list.json and file_search.json), call the workspace engines and encode.
#include <fmt/format.h>

#include "mcp/session_state.h"
#include "mcp/tool_registry.h"
#include "tools/tools.h"
#include "workspace/file_list.h"
#include "workspace/search.h"
#include "workspace/search_text.h"

namespace kiln::server {

namespace {

using nlohmann::json;
namespace ws = kiln::workspace;

// File names are bytes; JSON strings must be UTF-8. A name that is not shows U+FFFD.
std::string wire_path(const std::string& p) { return ws::valid_utf8(p) ? p : ws::sanitize_utf8(p); }

Result<ToolOutput> file_list(CallContext& ctx, const json& args) {
  auto wsp = ctx.session->workspace_for(args);
  if (!wsp) return std::unexpected(wsp.error());
  ws::ListRequest req;
  args.at("path").get_to(req.path);
  args.at("depth").get_to(req.depth);
  req.glob = args.value("glob", "");  // optional, no default: empty means no filter
  args.at("include_ignored").get_to(req.include_ignored);
  args.at("offset").get_to(req.offset);
  args.at("limit").get_to(req.limit);
  auto r = ws::list_files(*(*wsp)->root, req, ctx.stop);
  if (!r) return std::unexpected(r.error());

  json entries = json::array();
  for (const auto& e : r->entries) {
    json item = {{"path", wire_path(e.path)}, {"type", ws::to_string(e.type)}, {"size", e.size}, {"mtime", e.mtime}};
    if (e.type == ws::EntryType::symlink) item["target"] = wire_path(e.link_target);
    entries.push_back(std::move(item));
  }
  json out = {{"path", wire_path(r->path)}, {"entries", std::move(entries)}, {"total", r->total},
              {"truncated", r->truncated}};
  if (r->next_offset) out["next_offset"] = *r->next_offset;
  return ToolOutput{std::move(out)};
}

Result<ToolOutput> file_search(CallContext& ctx, const json& args) {
  auto wsp = ctx.session->workspace_for(args);
  if (!wsp) return std::unexpected(wsp.error());
  ws::SearchRequest req;
  args.at("pattern").get_to(req.pattern);
  args.at("path").get_to(req.path);
  req.glob = args.value("glob", "");  // optional, no default: empty means every file
  args.at("literal").get_to(req.literal);
  args.at("case_sensitive").get_to(req.case_sensitive);
  args.at("context_lines").get_to(req.context_lines);
  args.at("max_results").get_to(req.max_results);
  args.at("include_ignored").get_to(req.include_ignored);

  size_t reported = 0;
  auto progress = [&](size_t scanned) {
    if (!ctx.progress || scanned <= reported) return;  // progress must grow
    reported = scanned;
    ctx.progress(static_cast<double>(scanned), std::nullopt, fmt::format("scanned {} files", scanned));
  };
  auto r = ws::search(*(*wsp)->root, req, ctx.stop, progress);
  if (!r) return std::unexpected(r.error());  // cancellation arrives as Errc::cancelled
  // The walk ticks every so often; one that finished between ticks has still made progress, and a
  // client that asked for it hears the final count before the response.
  progress(r->files_scanned);

  json matches = json::array();
  for (const auto& m : r->matches) {
    json item = {{"path", wire_path(m.path)}, {"line", m.line}, {"column", m.column}, {"text", m.text}};
    if (req.context_lines > 0) {
      item["before"] = m.before;
      item["after"] = m.after;
    }
    matches.push_back(std::move(item));
  }
  json out = {{"matches", std::move(matches)},
              {"files_scanned", r->files_scanned},
              {"files_matched", r->files_matched},
              {"binary_files_skipped", r->binary_files_skipped},
              {"total_matches_seen", r->total_matches_seen},
              {"truncated", r->truncated}};
  return ToolOutput{std::move(out)};
}

}  // namespace

void register_search_tools(ToolRegistry& registry) {
  registry.add("file_list", file_list);
  registry.add("file_search", file_search);
}

}  // namespace kiln::server
