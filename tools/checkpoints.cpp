// checkpoint_create, checkpoint_list, checkpoint_diff, checkpoint_restore: thin handlers over
// workspace::CheckpointStore. A checkpoint belongs to its principal and its workspace; another's
// id is answered exactly as a missing one.
#include <fmt/format.h>

#include "mcp/session_state.h"
#include "mcp/tool_registry.h"
#include "tools/tools.h"
#include "workspace/checkpoint_store.h"
#include "workspace/root.h"
#include "workspace/state_store.h"

namespace kiln::server {

using nlohmann::json;
using workspace::CheckpointStore;

namespace {

// The workspace a checkpoint is of, opened from its record (it need not be the session's current).
Result<std::shared_ptr<const workspace::Root>> root_of(CallContext& ctx, const std::string& workspace_id) {
  if (auto cur = ctx.session->current(); cur && cur->id == workspace_id) return cur->root;
  auto rec = ctx.session->store().find_workspace(workspace_id);
  if (!rec) return std::unexpected(rec.error());
  if (!*rec) return fail(Errc::not_found, fmt::format("the workspace of this checkpoint ({}) is not known here", workspace_id));
  auto root = workspace::Root::open_resolved((*rec)->root);
  if (!root) return std::unexpected(root.error());
  return std::make_shared<const workspace::Root>(std::move(*root));
}

Result<ToolOutput> checkpoint_create(CallContext& ctx, CheckpointStore& store, const json& args) {
  auto ws = ctx.session->workspace_for(args);
  if (!ws) return std::unexpected(ws.error());
  workspace::CheckpointRequest q;
  q.root = (*ws)->root.get();
  q.workspace_id = (*ws)->id;
  q.principal = ctx.session->principal();
  q.label = args.value("label", "");
  q.trigger = "manual";
  auto c = store.create(q, ctx.stop);
  if (!c) return std::unexpected(c.error());
  json out = c->to_json();
  out["workspace"] = (*ws)->name;
  return ToolOutput{std::move(out)};
}

Result<ToolOutput> checkpoint_list(CallContext& ctx, CheckpointStore& store, const json& args) {
  auto ws = ctx.session->workspace_for(args);
  if (!ws) return std::unexpected(ws.error());
  store.recover(*(*ws)->root, (*ws)->id);  // a restore a killed server left half-done is finished first
  auto page = store.list((*ws)->id, ctx.session->principal(), args.value("limit", 50), args.value("cursor", ""));
  if (!page) return std::unexpected(page.error());
  json list = json::array();
  for (const auto& c : page->checkpoints) list.push_back(c.to_json());
  return ToolOutput{json{{"workspace", (*ws)->name},
                         {"checkpoints", std::move(list)},
                         {"next_cursor", page->next_cursor.value_or("")}}};
}

Result<ToolOutput> checkpoint_diff(CallContext& ctx, CheckpointStore& store, const json& args) {
  const std::string who = ctx.session->principal();
  auto from = store.get(args.at("from").get<std::string>(), who);
  if (!from) return std::unexpected(from.error());
  workspace::DiffRequest q;
  q.from = from->id;
  if (args.contains("to") && args["to"].get<std::string>() != "now") q.to = args["to"].get<std::string>();
  std::shared_ptr<const workspace::Root> root;
  if (auto r = root_of(ctx, from->workspace_id)) {
    root = *r;
    store.recover(*root, from->workspace_id);  // the files now are never a half-done restore
  } else if (!q.to || args.contains("path")) {
    return std::unexpected(r.error());
  }
  if (!q.to || args.contains("path")) q.root = root.get();
  if (args.contains("path")) {
    auto rel = root->relative(args["path"].get<std::string>());
    if (!rel) return std::unexpected(rel.error());
    q.path = *rel;
  }
  q.offset = args.value("offset", std::size_t(0));
  q.limit = args.value("limit", std::size_t(50));
  auto d = store.diff(q, who);
  if (!d) return std::unexpected(d.error());
  json changes = json::array();
  for (const auto& c : d->changes) {
    json j = {{"path", c.path}, {"change", c.change}};
    j["size_before"] = c.size_before ? json(*c.size_before) : json(nullptr);
    j["size_after"] = c.size_after ? json(*c.size_after) : json(nullptr);
    if (!c.type_before.empty()) j["type_before"] = c.type_before;
    if (!c.type_after.empty()) j["type_after"] = c.type_after;
    if (c.mode_before && c.mode_after && *c.mode_before != *c.mode_after) {
      j["mode_before"] = fmt::format("{:04o}", *c.mode_before);
      j["mode_after"] = fmt::format("{:04o}", *c.mode_after);
    }
    if (c.binary) {
      j["binary"] = true;
      j["sha256_before"] = c.sha_before.empty() ? json(nullptr) : json(c.sha_before);
      j["sha256_after"] = c.sha_after.empty() ? json(nullptr) : json(c.sha_after);
      j["diff"] = nullptr;
    } else {
      j["diff"] = c.diff;
      if (c.diff_truncated) j["diff_truncated"] = true;
    }
    changes.push_back(std::move(j));
  }
  json out = {{"from", d->from}, {"to", d->to}, {"changes", std::move(changes)}, {"total", d->total},
              {"truncated", d->truncated}};
  out["next_offset"] = d->next_offset ? json(*d->next_offset) : json(nullptr);
  return ToolOutput{std::move(out)};
}

Result<ToolOutput> checkpoint_restore(CallContext& ctx, CheckpointStore& store, const json& args) {
  const std::string who = ctx.session->principal();
  auto c = store.get(args.at("checkpoint_id").get<std::string>(), who);
  if (!c) return std::unexpected(c.error());
  auto root = root_of(ctx, c->workspace_id);
  if (!root) return std::unexpected(root.error());
  workspace::RestoreRequest q;
  q.root = root->get();
  q.workspace_id = c->workspace_id;
  q.principal = who;
  q.checkpoint_id = c->id;
  q.dry_run = args.value("dry_run", false);
  if (args.contains("paths"))
    for (const auto& p : args["paths"]) q.paths.push_back(p.get<std::string>());
  auto r = store.restore(q, ctx.stop);
  if (!r) return std::unexpected(r.error());
  json out = {{"checkpoint_id", c->id},
              {"dry_run", r->dry_run},
              {"restored", r->restored},
              {"deleted", r->deleted},
              {"checkpoint_before", r->dry_run ? json(nullptr) : json(r->checkpoint_before)}};
  if (!r->kept.empty()) out["kept"] = r->kept;
  if (!r->dry_run)
    out["how_to_undo"] = fmt::format("checkpoint_restore {{\"checkpoint_id\": \"{}\"}} puts back what was there before",
                                     r->checkpoint_before);
  return ToolOutput{std::move(out)};
}

}  // namespace

void register_checkpoint_tools(ToolRegistry& registry, CheckpointStore& store) {
  registry.add("checkpoint_create", [&store](CallContext& ctx, const json& a) { return checkpoint_create(ctx, store, a); });
  registry.add("checkpoint_list", [&store](CallContext& ctx, const json& a) { return checkpoint_list(ctx, store, a); });
  registry.add("checkpoint_diff", [&store](CallContext& ctx, const json& a) { return checkpoint_diff(ctx, store, a); });
  registry.add("checkpoint_restore", [&store](CallContext& ctx, const json& a) { return checkpoint_restore(ctx, store, a); });
}

}  // namespace kiln::server
