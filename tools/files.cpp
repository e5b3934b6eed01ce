// file_read, file_write, file_edit, file_move, file_delete: thin handlers that decode arguments
// (already validated against schemas/tools/file_*.json), call workspace/file_ops and encode.

#include "mcp/session_state.h"
#include "mcp/tool_registry.h"
#include "tools/tools.h"
#include "workspace/file_ops.h"

namespace kiln::server {

namespace {

using nlohmann::json;
namespace ws = kiln::workspace;

ws::Encoding encoding_arg(const json& args) {
  return args.at("encoding") == "base64" ? ws::Encoding::base64 : ws::Encoding::text;
}

std::optional<std::string> optional_string(const json& args, const char* key) {
  auto it = args.find(key);
  if (it == args.end() || !it->is_string()) return std::nullopt;
  return it->get<std::string>();
}

Result<ToolOutput> file_read(CallContext& ctx, const json& args) {
  auto wsp = ctx.session->workspace_for(args);
  if (!wsp) return std::unexpected(wsp.error());
  ws::ReadRequest req;
  args.at("path").get_to(req.path);
  args.at("offset").get_to(req.offset);
  // No schema default: it depends on the encoding (lines for text, bytes for base64).
  if (args.contains("limit")) req.limit = args["limit"].get<std::uint64_t>();
  req.encoding = encoding_arg(args);
  auto r = ws::read_file(*(*wsp)->root, req, ctx.stop);
  if (!r) return std::unexpected(r.error());
  const bool text = r->encoding == ws::Encoding::text;
  json out = {{"path", r->path},     {"content", r->content}, {"encoding", text ? "text" : "base64"},
              {"offset", r->offset}, {"count", r->count},     {"truncated", r->truncated},
              {"size", r->size}};
  // Absent for a page of a file too big to read whole (the note says why).
  if (r->total_lines) out["total_lines"] = *r->total_lines;
  if (r->sha256) out["sha256"] = *r->sha256;
  if (r->next_offset) out["next_offset"] = *r->next_offset;
  if (!r->note.empty()) out["note"] = r->note;
  return ToolOutput{std::move(out)};
}

Result<ToolOutput> file_write(CallContext& ctx, const json& args) {
  auto wsp = ctx.session->workspace_for(args);
  if (!wsp) return std::unexpected(wsp.error());
  ws::WriteRequest req;
  args.at("path").get_to(req.path);
  args.at("content").get_to(req.content);
  req.encoding = encoding_arg(args);
  req.if_sha256 = optional_string(args, "if_sha256");
  args.at("create_dirs").get_to(req.create_dirs);
  auto r = ws::write_file(*(*wsp)->root, req, ctx.stop);
  if (!r) return std::unexpected(r.error());
  json out = {{"path", r->path}, {"size", r->size}, {"sha256", r->sha256}, {"created", r->created}};
  return ToolOutput{std::move(out)};
}

Result<ToolOutput> file_edit(CallContext& ctx, const json& args) {
  auto wsp = ctx.session->workspace_for(args);
  if (!wsp) return std::unexpected(wsp.error());
  ws::EditRequest req;
  args.at("path").get_to(req.path);
  for (const auto& e : args.at("edits")) {
    req.edits.push_back(ws::Edit{e.at("old_text").get<std::string>(), e.at("new_text").get<std::string>(),
                                 e.at("replace_all").get<bool>()});
  }
  args.at("dry_run").get_to(req.dry_run);
  req.if_sha256 = optional_string(args, "if_sha256");
  auto r = ws::edit_file(*(*wsp)->root, req);
  if (!r) return std::unexpected(r.error());
  json out = {{"path", r->path}, {"diff", r->diff}, {"sha256", r->sha256},
              {"replacements", r->replacements}, {"applied", r->applied}};
  return ToolOutput{std::move(out)};
}

Result<ToolOutput> file_move(CallContext& ctx, const json& args) {
  auto wsp = ctx.session->workspace_for(args);
  if (!wsp) return std::unexpected(wsp.error());
  ws::MoveRequest req{args.at("from").get<std::string>(), args.at("to").get<std::string>(),
                      args.at("overwrite").get<bool>()};
  auto r = ws::move_path(*(*wsp)->root, req);
  if (!r) return std::unexpected(r.error());
  json out = {{"from", r->from}, {"to", r->to}};
  return ToolOutput{std::move(out)};
}

Result<ToolOutput> file_delete(CallContext& ctx, const json& args) {
  auto wsp = ctx.session->workspace_for(args);
  if (!wsp) return std::unexpected(wsp.error());
  ws::DeleteRequest req{args.at("path").get<std::string>(), args.at("recursive").get<bool>()};
  auto r = ws::delete_path(*(*wsp)->root, req);
  if (!r) return std::unexpected(r.error());
  json out = {{"path", r->path}, {"deleted", r->deleted}};
  return ToolOutput{std::move(out)};
}

}  // namespace

void register_file_tools(ToolRegistry& registry) {
  // std::string, not a literal: add() also has an overload taking a whole JSON definition, and a
  // literal converts to both.
  registry.add("file_read", file_read);
  registry.add("file_write", file_write);
  registry.add("file_edit", file_edit);
  registry.add("file_move", file_move);
  registry.add("file_delete", file_delete);
}

}  // namespace kiln::server
