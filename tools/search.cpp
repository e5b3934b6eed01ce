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
  req.path = args.value("path", ".");
  req.depth = args.value("depth", 1);
  req.glob = args.value("glob", "");
  req.include_ignored = args.value("include_ignored", false);
  req.offset = args.value("offset", std::size_t{0});
  req.limit = args.value("limit", std::size_t{500});
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
  std::string summary = fmt::format("{} entries under {}", r->total, r->path);
  if (r->next_offset) {
    summary += fmt::format(" (showing {}-{}; more from offset {})", req.offset + 1, req.offset + r->entries.size(),
                           *r->next_offset);
  }
  return ToolOutput{std::move(out), std::move(summary)};
}

Result<ToolOutput> file_search(CallContext& ctx, const json& args) {
  auto wsp = ctx.session->workspace_for(args);
  if (!wsp) return std::unexpected(wsp.error());
  ws::SearchRequest req;
  req.pattern = args.value("pattern", "");
  req.path = args.value("path", ".");
  req.glob = args.value("glob", "");
  req.literal = args.value("literal", false);
  req.case_sensitive = args.value("case_sensitive", true);
  req.context_lines = args.value("context_lines", 0);
  req.max_results = args.value("max_results", std::size_t{200});
  req.include_ignored = args.value("include_ignored", false);

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
  std::string summary = fmt::format("{} matching lines in {} files ({} files scanned)", r->total_matches_seen,
                                    r->files_matched, r->files_scanned);
  if (r->truncated) {
    summary += fmt::format("; showing the first {} by path: narrow path or glob to see the rest", r->matches.size());
  }
  return ToolOutput{std::move(out), std::move(summary)};
}

}  // namespace

void register_search_tools(ToolRegistry& registry) {
  registry.add("file_list", file_list);
  registry.add("file_search", file_search);
}

}  // namespace kiln::server
