// kiln.json as typed C++: validated against schemas/kiln.schema.json plus the rules a schema cannot
// say (unique check names, paths that stay in the workspace), so `verify` and `publish` trust it.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace kiln::workspace { class Root; }

namespace kiln::server {

struct ReportConfig {
  std::string format;  // "junit" or "tap"
  std::string path;    // relative to the workspace root, no ".." components
};

struct CheckConfig {
  std::string name;
  // What to exec: a string `run` becomes {"/bin/sh", "-c", run}, an array is taken as is.
  std::vector<std::string> argv;
  // The command as the user wrote it: the string itself, or the argv array as JSON (as sandbox_exec
  // shows commands), for traces and listings.
  std::string display;
  std::string description;
  std::string cwd;  // relative to the workspace root; empty means the root
  std::optional<double> timeout_s;
  std::map<std::string, std::string> env;
  std::optional<ReportConfig> report;
  bool on_failure_continue = false;  // on_failure: "continue"; the default "stop" skips later checks
  std::vector<std::string> services;  // names from KilnConfig::services this check needs
};

enum class ServiceKind { postgres, redis, command };
const char* to_string(ServiceKind k);

// A service name as it appears in environment variables (KILN_SERVICE_<NAME>_URL): upper case,
// '-' as '_'. kiln.json refuses two names that meet here.
std::string service_env_name(const std::string& service);

// One entry of kiln.json "services" (TOOLS.md, services inside the sandbox).
struct ServiceConfig {
  std::string name;  // [a-z][a-z0-9_-]{0,31}
  ServiceKind kind = ServiceKind::command;
  std::vector<std::string> argv;  // command: what to run; empty for postgres and redis
  std::string display;            // the command as written
  int port = 0;                   // after defaults: postgres 5432 (5433, ... for a second), redis 6379
  std::string ready_path;         // command: an HTTP path; empty means "the port accepts connections"
  std::vector<std::string> setup_argv;  // postgres: run once after the database is made
  std::string setup_display;
  std::map<std::string, std::string> env;
  std::string cwd;  // relative to the workspace root; empty means the root
  double ready_timeout_s = 60;
  std::string description;
};

// A service as JSON (every field, after defaults), for the configuration an app version stores,
// and the inverse; a stored service was validated when it was made, so the inverse only checks shape.
nlohmann::json to_json(const ServiceConfig& s);
Result<ServiceConfig> service_config_from_json(const nlohmann::json& j);

// Each field empty when kiln.json leaves it out; the publish tool supplies its own defaults.
struct PublishConfig {
  std::string path;
  std::string name;
  std::string share;  // "", "public", "password" or "invite"
};

// One entry of kiln.json "app" "schedules".
struct ScheduleConfig {
  std::string name;  // [a-z][a-z0-9_-]{0,31}
  std::string cron;  // as written; serve/cron.h parses it
  std::vector<std::string> argv;
  std::string display;
  double timeout_s = 600;
};

// kiln.json "app" (TOOLS.md, apps): what `publish {app: true}` runs and keeps running.
struct AppConfig {
  std::vector<std::string> argv;  // the web server
  std::string display;
  std::vector<std::string> services;  // names from KilnConfig::services
  int idle_s = 300;                   // 0: always on
  std::string ready_path;             // empty: the port accepting connections
  double start_timeout_s = 30;
  std::map<std::string, std::string> env;
  nlohmann::json limits = nlohmann::json::object();  // sandbox limits (make_policy owns their meaning)
  int max_connections = 256;
  double request_timeout_s = 60;
  std::vector<ScheduleConfig> schedules;
  // "none" (also written "loopback": the app's own loopback is up either way) or an allowlist
  // object as sandbox.network takes; "host" is refused (docs/apps.md). Kept as JSON: make_policy
  // owns its meaning, and the web process and every schedule share it.
  nlohmann::json network = "none";
  // Set by publish, never read from kiln.json: the --network-allow ceiling of the session that
  // published the app (an allowlist object), so the app cannot reach further than that session.
  nlohmann::json network_ceiling;  // null: none
};
nlohmann::json to_json(const AppConfig& a);
// The inverse, for a config stored with a published version (already validated when it was made).
Result<AppConfig> app_config_from_json(const nlohmann::json& j);

struct KilnConfig {
  std::vector<CheckConfig> checks;
  std::vector<ServiceConfig> services;  // in name order
  // Kept as JSON: sandbox::make_policy merges it with call arguments and owns its meaning.
  nlohmann::json sandbox = nlohmann::json::object();
  PublishConfig publish;
  bool checkpoints_auto = true;  // "checkpoints": {"auto": false} turns the ones around runs off
  std::optional<AppConfig> app;
  nlohmann::json raw = nlohmann::json::object();  // the whole document as parsed
  std::string source = "kiln.json";
};

// Parses and validates the text of a kiln.json. Every error is invalid_argument with a message that
// starts "kiln.json: " and names where, e.g.
//   kiln.json: /verify/1/report/format: expected one of "junit", "tap" (got "xml")
//   kiln.json: line 4, column 12: syntax error while parsing object - unexpected '}'; ...
// Never throws.
Result<KilnConfig> parse_kiln_config(std::string_view text);

// The embedded schemas/kiln.schema.json, parsed once (for tests and for tools that show it).
const nlohmann::json& kiln_config_schema();

// kiln.json of the workspace root, parsed and checked against schemas/kiln.schema.json; defaults
// when absent. A broken or invalid file is reported in `error` (and `config` holds the defaults)
// rather than failing the caller, so the workspace still opens.
struct LoadedConfig {
  nlohmann::json config = nlohmann::json::object();  // the document as written, when valid
  std::string source;  // "kiln.json" or "defaults"
  std::string error;
  std::optional<KilnConfig> typed;  // set exactly when source is "kiln.json"
};
LoadedConfig load_config(const workspace::Root& root);

}  // namespace kiln::server
