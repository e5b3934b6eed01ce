// Resources: the current workspace's files as file:// URIs (listed, read, subscribed), the
// families of ServerContext::resources (kiln://trace/), and completion of file paths and workspace names.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fmt/format.h>

#include <sodium.h>

#include "core/fd_io.h"
#include "core/quote.h"
#include "protocol/errors.h"
#include "protocol/mcp_params.h"
#include "http/mime_types.h"
#include "mcp/methods.h"
#include "mcp/session_state.h"
#include "workspace/file_list.h"
#include "workspace/kiln_config.h"
#include "workspace/state_store.h"

namespace kiln::server {

namespace {

using nlohmann::json;

constexpr int kResourcePage = 500;
constexpr std::size_t kMaxCompletions = 100;  // the spec caps a completion at 100 values
// resources/read has no paging, so large files are refused with a pointer to file_read.
constexpr std::size_t kMaxResourceBytes = 384 * 1024;

std::string template_uri(const OpenWorkspace& ws) { return file_uri(ws.root->path()) + "/{+path}"; }

// 2025-11-25 answers an unknown resource with -32002; 2026-07-28 with -32602 (and forbids -32002).
int not_found_code(const MethodEnv& env) { return env.modern ? protocol::kInvalidParams : protocol::kResourceNotFound; }

// The family serving `uri`, or nullptr for a file:// URI (or none at all).
const ResourceProvider* provider_for(const MethodEnv& env, const std::string& uri) {
  for (const auto* p : env.server.resources) {
    if (uri.starts_with(p->prefix)) return p;
  }
  return nullptr;
}

std::expected<json, RpcError> provided_resource(MethodEnv& env, const ResourceProvider& p, const std::string& uri) {
  auto doc = p.read(env.state, uri);
  if (!doc) return std::unexpected(RpcError{not_found_code(env), "Resource not found: " + doc.error().message,
                                            json{{"uri", bounded(uri)}}});
  return *doc;
}

// The workspace and the relative path a file:// URI points at; the URI must lie in the
// session's current workspace.
struct UriTarget {
  std::shared_ptr<const OpenWorkspace> ws;
  std::string rel;
};

std::expected<UriTarget, RpcError> resolve_uri(MethodEnv& env, const std::string& uri) {
  std::string path = path_from_file_uri(uri);
  if (path.empty()) {
    return std::unexpected(RpcError{protocol::kInvalidParams,
                                    "Invalid params: '" + bounded(uri) + "' is not a file:// URI of the workspace",
                                    json{{"uri", bounded(uri)}}});
  }
  // A modern request has no current workspace: the URI itself says which known one it is in.
  auto ws = env.state.is_stateless() ? env.state.workspace_containing(path) : env.state.workspace_for(json::object());
  if (!ws) {
    return std::unexpected(RpcError{not_found_code(env), ws.error().message, json{{"uri", bounded(uri)}}});
  }
  auto rel = (*ws)->root->relative(path);
  if (!rel) {
    return std::unexpected(RpcError{not_found_code(env), "Resource not found: " + rel.error().message,
                                    json{{"uri", bounded(uri)}}});
  }
  return UriTarget{*ws, *rel};
}

bool valid_utf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    std::size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (len == 0 || i + len > s.size()) return false;
    for (std::size_t k = 1; k < len; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    }
    if (c == 0) return false;
    i += len;
  }
  return true;
}

}  // namespace

MethodResult resources_list(MethodEnv& env, const json& params) {
  auto cursor = protocol::cursor(params);
  if (!cursor) return std::unexpected(RpcError{protocol::kInvalidParams, cursor.error().message});
  std::size_t offset = 0;
  if (*cursor) {
    const std::string& c = **cursor;
    if (c.empty() || c.size() > 12 || !std::ranges::all_of(c, [](char ch) { return ch >= '0' && ch <= '9'; })) {
      return std::unexpected(RpcError{protocol::kInvalidParams, "Invalid params: unknown cursor '" + bounded(c) + "'"});
    }
    offset = std::stoul(c);
  }
  auto ws = env.state.current();
  if (!ws) return json{{"resources", json::array()}};  // nothing open, nothing to list
  workspace::ListRequest req;
  req.path = ".";
  req.depth = 0;
  req.offset = offset;
  req.limit = kResourcePage;
  auto listed = workspace::list_files(*ws->root, req);
  if (!listed) return std::unexpected(RpcError{protocol::kInternalError, listed.error().message});
  json resources = json::array();
  for (const auto& e : listed->entries) {
    if (e.type != "file") continue;
    json r = {{"uri", file_uri(ws->root->path() + "/" + e.path)}, {"name", e.path}, {"size", e.size}};
    if (auto mime = mime_type_for(e.path); !mime.empty()) r["mimeType"] = std::string(mime.substr(0, mime.find(';')));
    resources.push_back(std::move(r));
  }
  if (!*cursor) {
    for (const auto* p : env.server.resources) {
      for (auto& r : p->list(env.state, *ws)) resources.push_back(std::move(r));
    }
  }
  json out = {{"resources", std::move(resources)}};
  if (listed->next_offset) out["nextCursor"] = std::to_string(*listed->next_offset);
  return out;
}

MethodResult resources_templates_list(MethodEnv& env, const json& params) {
  auto cursor = protocol::cursor(params);
  if (!cursor) return std::unexpected(RpcError{protocol::kInvalidParams, cursor.error().message});
  if (*cursor) return std::unexpected(RpcError{protocol::kInvalidParams, "Invalid params: unknown cursor '" + bounded(**cursor) + "'"});
  json templates = json::array();
  for (const auto* p : env.server.resources) templates.push_back(p->uri_template);
  if (auto ws = env.state.current()) {
    templates.push_back({{"uriTemplate", template_uri(*ws)},
                         {"name", "workspace-file"},
                         {"title", "File in workspace " + ws->name},
                         {"description", "A file of the current workspace, by its path relative to the root"}});
  }
  return json{{"resourceTemplates", std::move(templates)}};
}

MethodResult resources_read(MethodEnv& env, const json& params) {
  auto p = protocol::decode_read_resource(params);
  if (!p) return std::unexpected(RpcError{protocol::kInvalidParams, p.error().message});
  if (const auto* provider = provider_for(env, p->uri)) {
    auto doc = provided_resource(env, *provider, p->uri);
    if (!doc) return std::unexpected(doc.error());
    return json{{"contents", json::array({{{"uri", p->uri}, {"mimeType", "application/json"}, {"text", doc->dump(2)}}})}};
  }
  auto target = resolve_uri(env, p->uri);
  if (!target) return std::unexpected(target.error());
  auto fd = target->ws->root->open(target->rel, O_RDONLY);
  if (!fd) {
    return std::unexpected(RpcError{not_found_code(env), "Resource not found: " + fd.error().message,
                                    json{{"uri", bounded(p->uri)}}});
  }
  struct stat st {};
  if (::fstat(fd->get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return std::unexpected(RpcError{not_found_code(env), "Resource not found: " + bounded(p->uri) + " is not a file",
                                    json{{"uri", bounded(p->uri)}}});
  }
  if (std::size_t(st.st_size) > kMaxResourceBytes) {
    return std::unexpected(RpcError{protocol::kInvalidParams,
                                    fmt::format("{} is {} bytes, more than resources/read returns ({}); use the "
                                                "file_read tool with offset/limit to page through it",
                                                bounded(p->uri), st.st_size, kMaxResourceBytes),
                                    json{{"uri", bounded(p->uri)}}});
  }
  std::string data;
  data.resize(std::size_t(st.st_size));
  ssize_t got = read_full(fd->get(), data.data(), data.size());
  data.resize(got < 0 ? 0 : std::size_t(got));
  json content = {{"uri", p->uri}};
  std::string_view mime = mime_type_for(target->rel);
  if (valid_utf8(data)) {
    content["mimeType"] = mime.empty() ? "text/plain" : std::string(mime.substr(0, mime.find(';')));
    content["text"] = std::move(data);
  } else {
    content["mimeType"] = mime.empty() ? "application/octet-stream" : std::string(mime.substr(0, mime.find(';')));
    std::string b64(sodium_base64_encoded_len(data.size(), sodium_base64_VARIANT_ORIGINAL), '\0');
    sodium_bin2base64(b64.data(), b64.size(), reinterpret_cast<const unsigned char*>(data.data()), data.size(),
                      sodium_base64_VARIANT_ORIGINAL);
    b64.resize(std::strlen(b64.c_str()));
    content["blob"] = std::move(b64);
  }
  return json{{"contents", json::array({std::move(content)})}};
}

MethodResult resources_subscribe(MethodEnv& env, const json& params) {
  auto p = protocol::decode_read_resource(params);
  if (!p) return std::unexpected(RpcError{protocol::kInvalidParams, p.error().message});
  if (const auto* provider = provider_for(env, p->uri)) {
    auto doc = provided_resource(env, *provider, p->uri);
    if (!doc) return std::unexpected(doc.error());
    env.set_subscription(p->uri, true);
    return json::object();
  }
  auto target = resolve_uri(env, p->uri);
  if (!target) return std::unexpected(target.error());
  env.set_subscription(p->uri, true);
  return json::object();
}

std::expected<void, RpcError> check_subscribable(MethodEnv& env, const std::string& uri) {
  // The same test resources/subscribe makes: a family's resource must be readable by this
  // principal (no listening on another's trace), a file URI must lie in a workspace.
  if (const auto* provider = provider_for(env, uri)) {
    auto doc = provided_resource(env, *provider, uri);
    if (!doc) return std::unexpected(doc.error());
    return {};
  }
  auto target = resolve_uri(env, uri);
  if (!target) return std::unexpected(target.error());
  return {};
}

MethodResult resources_unsubscribe(MethodEnv& env, const json& params) {
  auto p = protocol::decode_read_resource(params);
  if (!p) return std::unexpected(RpcError{protocol::kInvalidParams, p.error().message});
  env.set_subscription(p->uri, false);
  return json::object();
}

MethodResult completion_complete(MethodEnv& env, const json& params) {
  auto p = protocol::decode_complete(params);
  if (!p) return std::unexpected(RpcError{protocol::kInvalidParams, p.error().message});
  std::vector<std::string> values;
  const std::string& prefix = p->argument_value;
  if (p->ref_type == "ref/prompt") {
    if (p->ref_name_or_uri != "fix_failing_checks") {
      return std::unexpected(RpcError{protocol::kInvalidParams, "Invalid params: unknown prompt '" + bounded(p->ref_name_or_uri) + "'"});
    }
    if (p->argument_name == "workspace") {
      auto list = env.state.store().list_workspaces();
      if (list) {
        for (const auto& w : *list) {
          if (w.name.starts_with(prefix)) values.push_back(w.name);
        }
      }
    } else if (p->argument_name == "checks") {
      if (auto ws = env.state.current()) {
        LoadedConfig cfg = load_config(*ws->root);
        // The value may be a comma-separated list; complete its last element.
        auto comma = prefix.rfind(',');
        std::string head = comma == std::string::npos ? "" : prefix.substr(0, comma + 1);
        std::string last = comma == std::string::npos ? prefix : prefix.substr(comma + 1);
        if (cfg.config.contains("verify") && cfg.config["verify"].is_array()) {
          for (const auto& check : cfg.config["verify"]) {
            if (!check.is_object() || !check.contains("name") || !check["name"].is_string()) continue;
            std::string name = check["name"].get<std::string>();
            if (name.starts_with(last)) values.push_back(head + name);
          }
        }
      }
    }
  } else if (p->ref_type == "ref/resource") {
    auto ws = env.state.current();
    if (ws && p->ref_name_or_uri == template_uri(*ws) && p->argument_name == "path") {
      auto slash = prefix.rfind('/');
      std::string dir = slash == std::string::npos ? "." : prefix.substr(0, slash);
      workspace::ListRequest req;
      req.path = dir.empty() ? "." : dir;
      req.depth = 1;
      req.limit = 5000;
      if (auto listed = workspace::list_files(*ws->root, req)) {
        for (const auto& e : listed->entries) {
          if (e.path.starts_with(prefix)) values.push_back(e.type == "dir" ? e.path + "/" : e.path);
        }
      }
    }
  } else {
    return std::unexpected(RpcError{protocol::kInvalidParams, "Invalid params: ref.type must be ref/prompt or ref/resource"});
  }
  std::ranges::sort(values);
  std::size_t total = values.size();
  if (values.size() > kMaxCompletions) values.resize(kMaxCompletions);
  return json{{"completion", {{"values", values}, {"total", total}, {"hasMore", total > kMaxCompletions}}}};
}

}  // namespace kiln::server
