// Joins embedded tool schemas with handlers, and refuses to start when the two disagree.
#include "mcp/tool_registry.h"

#include <cstdio>
#include <cstdlib>
#include <set>

#include "protocol/json_schema.h"
#include "schemas/embedded.h"

namespace kiln::server {

namespace {

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "kiln: tool registration error: %s\n", what.c_str());
  std::abort();
}

// Every schemas/tools/*.json, parsed once.
const std::map<std::string, nlohmann::json>& embedded_tool_schemas() {
  static const std::map<std::string, nlohmann::json> schemas = [] {
    std::map<std::string, nlohmann::json> out;
    for (const auto& f : kiln::schemas::all()) {
      if (!f.path.starts_with("tools/")) continue;
      auto j = nlohmann::json::parse(f.text, nullptr, false);
      if (j.is_discarded() || !j.is_object()) die("schemas/" + std::string(f.path) + " is not a JSON object");
      std::string name = j.value("name", "");
      if (name.empty()) die("schemas/" + std::string(f.path) + " has no name");
      out[name] = std::move(j);
    }
    return out;
  }();
  return schemas;
}

const nlohmann::json& tool_schema(const std::string& name) {
  const auto& schemas = embedded_tool_schemas();
  auto it = schemas.find(name);
  if (it == schemas.end()) die("no schemas/tools/" + name + ".json for a registered tool");
  return it->second;
}

void check_definition(const std::string& name, const nlohmann::json& def) {
  for (const char* key : {"description", "inputSchema", "outputSchema", "annotations"}) {
    if (!def.contains(key)) die(name + ": missing '" + key + "'");
  }
  for (const char* key : {"inputSchema", "outputSchema"}) {
    const auto& s = def[key];
    if (!s.is_object() || s.value("type", "") != "object") die(name + ": " + key + " must have type object");
    if (auto kw = protocol::unsupported_keyword(s)) die(name + ": " + key + " uses unsupported keyword '" + *kw + "'");
  }
  if (def["inputSchema"].value("additionalProperties", true) != false)
    die(name + ": inputSchema must set additionalProperties false");
  for (const char* hint : {"readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"}) {
    if (!def["annotations"].contains(hint) || !def["annotations"][hint].is_boolean())
      die(name + ": annotation '" + hint + "' must be set explicitly");
  }
}

}  // namespace

void ToolRegistry::add(const std::string& name, ToolHandler handler) {
  if (tools_.contains(name)) die("tool '" + name + "' registered twice");
  nlohmann::json def = tool_schema(name);
  check_definition(name, def);
  tools_[name] = ToolEntry{std::move(def), std::move(handler)};
  order_.push_back(name);
}

void ToolRegistry::add_definition(nlohmann::json definition, ToolHandler handler) {
  std::string name = definition.value("name", "");
  if (name.empty()) die("a tool definition without a name");
  if (tools_.contains(name)) die("tool '" + name + "' registered twice");
  check_definition(name, definition);
  tools_[name] = ToolEntry{std::move(definition), std::move(handler)};
  order_.push_back(name);
}

void ToolRegistry::set_preflight(const std::string& name, ToolPreflight preflight) {
  auto it = tools_.find(name);
  if (it == tools_.end()) die("a preflight for tool '" + name + "', which is not registered");
  it->second.preflight = std::move(preflight);
}

void ToolRegistry::check_complete() const {
  for (const auto& [name, schema] : embedded_tool_schemas()) {
    if (!tools_.contains(name)) die("schemas/tools/" + name + ".json has no handler");
  }
}

void ToolRegistry::populate_in_background(std::function<void(ToolRegistry&)> fill) {
  {
    std::lock_guard lock(ready_mu_);
    ready_ = false;
  }
  filler_ = std::jthread([this, fill = std::move(fill)] {
    fill(*this);
    {
      std::lock_guard lock(ready_mu_);
      ready_ = true;
    }
    ready_cv_.notify_all();
  });
}

void ToolRegistry::wait_ready() const {
  std::unique_lock lock(ready_mu_);
  ready_cv_.wait(lock, [this] { return ready_; });
}

const ToolEntry* ToolRegistry::find(const std::string& name) const {
  wait_ready();
  auto it = tools_.find(name);
  return it == tools_.end() ? nullptr : &it->second;
}

std::vector<nlohmann::json> ToolRegistry::definitions() const {
  wait_ready();
  std::vector<nlohmann::json> out;
  out.reserve(order_.size());
  for (const auto& name : order_) out.push_back(tools_.at(name).definition);
  return out;
}

}  // namespace kiln::server
