// The table of tools: each entry joins a schema from schemas/tools/NAME.json with a handler.
// A tool call is decode-validate -> run -> encode; a handler failure becomes isError, never a
// JSON-RPC error. Registration mistakes (a handler without schema, a schema without handler)
// abort at start-up so they cannot ship.
#pragma once

#include <condition_variable>
#include <functional>
#include <map>
#include <optional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "mcp/call_context.h"

namespace kiln::server {

// What a tool handler returns on success: the structured result (must match the outputSchema).
// The client gets it as structuredContent and as the JSON text block, so everything an agent must
// see (a warning, a truncation) belongs in it.
struct ToolOutput {
  nlohmann::json structured = nlohmann::json::object();
};

// `arguments` passed the tool's inputSchema and carry its defaults (protocol::apply_defaults).
using ToolHandler = std::function<Result<ToolOutput>(CallContext&, const nlohmann::json& arguments)>;

// Runs before a tool (and before a task is made of it): what must be settled with the person
// first. Returns the modern era's inputRequests (elicitations the client is to show) when the call
// cannot go on without them, nullopt when it can, or an error (a tool error result).
using ToolPreflight = std::function<Result<std::optional<nlohmann::json>>(CallContext&, const nlohmann::json& arguments)>;

struct ToolEntry {
  nlohmann::json definition;  // name, title, description, inputSchema, outputSchema, annotations
  ToolHandler handler;
  ToolPreflight preflight;    // may be empty
};

class ToolRegistry {
 public:
  // Registers `handler` under the schema file schemas/tools/<name>.json (embedded at build time).
  void add(const std::string& name, ToolHandler handler);
  // Gives the tool `name` (registered before) a preflight step.
  void set_preflight(const std::string& name, ToolPreflight preflight);
  // Registers a tool whose definition is given directly (tests use it for probe tools).
  void add_definition(nlohmann::json definition, ToolHandler handler);
  // Aborts the process with a message if any embedded tool schema lacks a handler or vice versa.
  void check_complete() const;

  // Fills the table on a background thread, so a server can answer `initialize` while schemas
  // are still being parsed; find() and definitions() wait until `fill` has returned.
  void populate_in_background(std::function<void(ToolRegistry&)> fill);

  const ToolEntry* find(const std::string& name) const;
  std::vector<nlohmann::json> definitions() const;  // in registration order

 private:
  void wait_ready() const;

  mutable std::mutex ready_mu_;
  mutable std::condition_variable ready_cv_;
  bool ready_ = true;
  std::jthread filler_;
  std::map<std::string, ToolEntry> tools_;
  std::vector<std::string> order_;
};

}  // namespace kiln::server
