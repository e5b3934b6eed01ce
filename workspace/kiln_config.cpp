// Reading kiln.json: JSON parsing with positions a person can find in an editor, schema validation
// with messages that name the key, and the checks a schema cannot express.
#include "workspace/kiln_config.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>

#include <fmt/format.h>

#include "core/fd_io.h"
#include "protocol/json_duplicates.h"
#include "protocol/json_schema.h"
#include "sandbox/egress/egress_policy.h"
#include "sandbox/secrets.h"
#include "schemas/embedded.h"
#include "workspace/kiln_config_memo.h"
#include "workspace/root.h"

namespace kiln::server {

namespace {

using nlohmann::json;

constexpr std::size_t kMaxConfigBytes = 1 << 20;
constexpr std::string_view kSchemaPath = "kiln.schema.json";

// Why an app never gets the host's network: it runs unattended, for whoever its share mode admits,
// and the host's network is also the host's own loopback (kiln serve's control API, local databases).
constexpr std::string_view kAppHostNetwork =
    "network \"host\" is refused for an app: it runs unattended for whoever its share mode admits, and the "
    "host's network includes the host's own loopback (kiln serve's control API, local databases) and every "
    "address the host can reach. List what it needs instead, e.g. {\"allow\": [\"api.example.com\"]} (\"*\" for "
    "any public name); \"none\" (the default) keeps it to its own loopback";

struct LoadedSchema {
  json schema;
  std::string problem;  // set when the embedded schema is missing or unusable: a build bug
};

const LoadedSchema& loaded_schema() {
  static const LoadedSchema s = [] {
    LoadedSchema out;
    for (const auto& f : kiln::schemas::all()) {
      if (f.path != kSchemaPath) continue;
      out.schema = json::parse(f.text, nullptr, false);
      if (out.schema.is_discarded() || !out.schema.is_object()) {
        out.schema = json();
        out.problem = "the embedded schemas/kiln.schema.json is not a JSON object";
      } else if (auto kw = protocol::unsupported_keyword(out.schema)) {
        // A keyword the validator skips would let bad configs through unnoticed.
        out.problem = "schemas/kiln.schema.json: " + *kw;
      }
      return out;
    }
    out.problem = "schemas/kiln.schema.json is not embedded in this build";
    return out;
  }();
  return s;
}


std::string as_json(const json& v) { return v.dump(-1, ' ', false, json::error_handler_t::replace); }
std::string as_json(const std::string& s) { return as_json(json(s)); }

Error config_error(std::string_view where, std::string_view what) {
  return Error{Errc::invalid_argument,
               where.empty() ? fmt::format("kiln.json: {}", what) : fmt::format("kiln.json: {}: {}", where, what)};
}

// nlohmann gives the 1-based byte index of the character it stopped at; editors want line:column.
std::pair<std::size_t, std::size_t> line_column(std::string_view text, std::size_t byte) {
  const std::size_t pos = std::min(byte > 0 ? byte - 1 : 0, text.size());
  const std::size_t line = 1 + std::size_t(std::count(text.begin(), text.begin() + std::ptrdiff_t(pos), '\n'));
  const std::size_t nl = text.rfind('\n', pos == 0 ? std::string_view::npos : pos - 1);
  const std::size_t column = nl == std::string_view::npos || pos == 0 ? pos + 1 : pos - nl;
  return {line, column};
}

// The parser's own wording without its "[json.exception...] parse error at ...: " prefix (we give
// the position ourselves), and with raw bytes of a broken file kept out of a UTF-8 result.
std::string parser_message(const char* what) {
  std::string_view w(what);
  std::string_view msg = w;
  if (auto pe = w.find("parse error"); pe != std::string_view::npos) {
    if (auto colon = w.find(": ", pe); colon != std::string_view::npos) msg = w.substr(colon + 2);
  }
  std::string out(msg);
  for (char& c : out) {
    if (static_cast<unsigned char>(c) >= 0x80) c = '?';
  }
  return out;
}

Result<json> parse_json(std::string_view text) {
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    return std::unexpected(config_error("", "the file is empty; write {} (or delete the file) for the defaults"));
  }
  // nlohmann keeps the last of two equal keys without a word; in a hand-edited file the first one
  // is usually the one the user is looking at, so a duplicate is an error.
  std::optional<protocol::DuplicateKey> dup;
  try {
    json j = protocol::parse_noting_duplicates(text, dup);
    if (dup) {
      return std::unexpected(config_error(dup->pointer, fmt::format("duplicate key {}; JSON keeps only the last one, "
                                                                    "so remove or merge the other",
                                                                    as_json(dup->key))));
    }
    return j;
  } catch (const json::parse_error& e) {
    auto [line, column] = line_column(text, e.byte);
    return std::unexpected(config_error(fmt::format("line {}, column {}", line, column), parser_message(e.what())));
  } catch (const json::exception& e) {
    return std::unexpected(config_error("", parser_message(e.what())));
  }
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::vector<std::string> split(std::string_view s, std::string_view sep) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (std::size_t at; (at = s.find(sep, start)) != std::string_view::npos; start = at + sep.size()) {
    out.emplace_back(s.substr(start, at - start));
  }
  out.emplace_back(s.substr(start));
  return out;
}

// The validator words things for tool arguments; a config file reads better with the offending
// value quoted next to the allowed ones, and with a guess at what a misspelt key meant.
std::string reword(const protocol::SchemaViolation& v, const json& doc) {
  const json* value = nullptr;
  try {
    const json::json_pointer ptr(v.path);
    if (doc.contains(ptr)) value = &doc.at(ptr);
  } catch (const json::exception&) {
  }
  if (v.path == "/app/network" && value && *value == "host") return std::string(kAppHostNetwork);
  constexpr std::string_view kOneOf = "must be one of: ";
  if (v.message.starts_with(kOneOf) && value) {
    std::vector<std::string> allowed;
    for (const auto& a : split(std::string_view(v.message).substr(kOneOf.size()), ", ")) allowed.push_back(as_json(a));
    std::string list;
    for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
    return fmt::format("expected one of {} (got {})", list, as_json(*value));
  }
  constexpr std::string_view kUnexpected = "unexpected property '";
  if (v.message.starts_with(kUnexpected)) {
    auto end = v.message.find("' (allowed: ", kUnexpected.size());
    if (end != std::string::npos && v.message.ends_with(")")) {
      const std::string name = v.message.substr(kUnexpected.size(), end - kUnexpected.size());
      const std::size_t list_at = end + std::string_view("' (allowed: ").size();
      auto allowed = split(std::string_view(v.message).substr(list_at, v.message.size() - 1 - list_at), ", ");
      std::string best;
      std::size_t best_d = 3;  // further than two edits is a different word, not a typo
      for (const auto& a : allowed) {
        auto d = edit_distance(name, a);
        if (d < best_d) best_d = d, best = a;
      }
      if (!best.empty()) return fmt::format("{}; did you mean '{}'?", v.message, best);
    }
  }
  return v.message;
}

// Paths in kiln.json name things inside the workspace; the sandbox would refuse anything else at
// run time, but the config is the place to say so.
std::optional<std::string> path_problem(const std::string& p) {
  constexpr std::string_view kUse = "use a path inside the workspace, relative to its root";
  if (p.find('\0') != std::string::npos) return fmt::format("{} contains a NUL byte; {}", as_json(p), kUse);
  if (p.starts_with('/')) return fmt::format("{} is absolute; {}", as_json(p), kUse);
  for (const auto& part : split(p, "/")) {
    if (part == "..") return fmt::format("{} leaves the workspace through '..'; {}", as_json(p), kUse);
  }
  return std::nullopt;
}

Result<std::map<std::string, std::string>> env_map(const json& env, const std::string& where) {
  std::map<std::string, std::string> out;
  for (const auto& [k, v] : env.items()) {
    const std::string at = where + "/" + protocol::json_pointer_segment(k);
    if (!sandbox::valid_secret_name(k)) {
      return std::unexpected(config_error(at, fmt::format("{} is not an environment variable name (letters, digits "
                                                          "and '_', not starting with a digit)",
                                                          as_json(k))));
    }
    const auto& s = v.get_ref<const std::string&>();
    if (s.find('\0') != std::string::npos) return std::unexpected(config_error(at, "contains a NUL byte"));
    out[k] = s;
  }
  return out;
}

// A command as kiln.json writes it: a string for /bin/sh -c, or an argv array.
Result<void> to_command(const json& run, const std::string& where, std::vector<std::string>& argv,
                        std::string& display) {
  if (run.is_string()) {
    display = run.get<std::string>();
    argv = {"/bin/sh", "-c", display};
  } else {
    for (const auto& a : run) argv.push_back(a.get<std::string>());
    display = as_json(run);
    if (argv.front().empty()) return std::unexpected(config_error(where + "/0", "the program name is empty"));
  }
  for (const auto& a : argv)
    if (a.find('\0') != std::string::npos) return std::unexpected(config_error(where, "contains a NUL byte"));
  return {};
}

Result<CheckConfig> to_check(const json& j, const std::string& where) {
  CheckConfig c;
  c.name = j.at("name").get<std::string>();
  if (auto ok = to_command(j.at("run"), where + "/run", c.argv, c.display); !ok) return std::unexpected(ok.error());
  c.description = j.value("description", "");
  c.cwd = j.value("cwd", "");
  if (!c.cwd.empty()) {
    if (auto p = path_problem(c.cwd)) return std::unexpected(config_error(where + "/cwd", *p));
  }
  if (c.cwd == ".") c.cwd.clear();
  if (j.contains("timeout_s")) c.timeout_s = j.at("timeout_s").get<double>();
  if (j.contains("env")) {
    auto env = env_map(j.at("env"), where + "/env");
    if (!env) return std::unexpected(env.error());
    c.env = std::move(*env);
  }
  if (j.contains("report")) {
    ReportConfig r{j.at("report").at("format").get<std::string>(), j.at("report").at("path").get<std::string>()};
    if (auto p = path_problem(r.path)) return std::unexpected(config_error(where + "/report/path", *p));
    c.report = std::move(r);
  }
  c.on_failure_continue = j.value("on_failure", "stop") == "continue";
  if (j.contains("services")) c.services = j.at("services").get<std::vector<std::string>>();
  return c;
}

bool valid_service_name(const std::string& n) {
  if (n.empty() || n.size() > 32 || n[0] < 'a' || n[0] > 'z') return false;
  return std::all_of(n.begin(), n.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  });
}

Result<ServiceConfig> to_service(const std::string& name, const json& j, const std::string& where) {
  ServiceConfig s;
  s.name = name;
  if (!valid_service_name(name))
    return std::unexpected(config_error(where, fmt::format("service name {} must be lower-case letters, digits, '_' "
                                                           "and '-', start with a letter, at most 32 characters",
                                                           as_json(name))));
  const std::string kind = j.value("kind", j.contains("run") ? "command" : "");
  if (kind.empty())
    return std::unexpected(config_error(where, "needs \"kind\": \"postgres\" or \"redis\", or a \"run\" command "
                                               "and the \"port\" it listens on"));
  s.kind = kind == "postgres" ? ServiceKind::postgres : kind == "redis" ? ServiceKind::redis : ServiceKind::command;
  if (s.kind == ServiceKind::command) {
    if (!j.contains("run")) return std::unexpected(config_error(where, "kind command needs \"run\": the server's command"));
    if (!j.contains("port"))
      return std::unexpected(config_error(where, "kind command needs \"port\": where the server listens on loopback"));
    if (auto ok = to_command(j.at("run"), where + "/run", s.argv, s.display); !ok) return std::unexpected(ok.error());
    s.ready_path = j.value("ready", "");
  } else {
    if (j.contains("run"))
      return std::unexpected(config_error(where + "/run", fmt::format("kind {} runs the host's own server; drop \"run\" "
                                                                      "or use kind command", kind)));
    if (j.contains("ready"))
      return std::unexpected(config_error(where + "/ready", fmt::format("kind {} has its own readiness check; drop "
                                                                        "\"ready\"", kind)));
  }
  if (j.contains("setup")) {
    if (s.kind != ServiceKind::postgres)
      return std::unexpected(config_error(where + "/setup", "only kind postgres has a setup step (it runs once after "
                                                            "the database is made); run other preparation in your checks"));
    if (auto ok = to_command(j.at("setup"), where + "/setup", s.setup_argv, s.setup_display); !ok)
      return std::unexpected(ok.error());
  }
  if (j.contains("port")) s.port = j.at("port").get<int>();
  if (j.contains("env")) {
    auto env = env_map(j.at("env"), where + "/env");
    if (!env) return std::unexpected(env.error());
    s.env = std::move(*env);
  }
  s.cwd = j.value("cwd", "");
  if (!s.cwd.empty()) {
    if (auto p = path_problem(s.cwd)) return std::unexpected(config_error(where + "/cwd", *p));
  }
  if (s.cwd == ".") s.cwd.clear();
  s.ready_timeout_s = j.value("ready_timeout_s", 60.0);
  s.description = j.value("description", "");
  return s;
}

// An app's network is checked when kiln.json is read, not when the app first starts in kiln serve,
// so a bad entry fails the publish (naming the entry) instead of a sandbox hours later.
Result<void> check_app_network(const json& n, const std::string& where) {
  if (n.is_string()) {
    if (n == "host") return std::unexpected(config_error(where, kAppHostNetwork));
    return {};
  }
  for (const char* key : {"allow", "deny"}) {
    if (!n.contains(key)) continue;
    const json& list = n.at(key);
    for (std::size_t i = 0; i < list.size(); ++i)
      if (auto r = egress::parse_rule(list[i].get<std::string>(), fmt::format("kiln.json: {}/{}/{}", where, key, i)); !r)
        return std::unexpected(r.error());
  }
  if (auto p = egress::parse_policy(n, "kiln.json: " + where); !p) return std::unexpected(p.error());
  return {};
}

Result<AppConfig> to_app(const json& j, const std::string& where) {
  AppConfig a;
  if (auto ok = to_command(j.at("run"), where + "/run", a.argv, a.display); !ok) return std::unexpected(ok.error());
  if (j.contains("services")) a.services = j.at("services").get<std::vector<std::string>>();
  a.idle_s = j.value("idle_s", 300);
  a.ready_path = j.value("ready", "");
  a.start_timeout_s = j.value("start_timeout_s", 30.0);
  if (j.contains("env")) {
    auto env = env_map(j.at("env"), where + "/env");
    if (!env) return std::unexpected(env.error());
    a.env = std::move(*env);
  }
  if (j.contains("limits")) a.limits = j.at("limits");
  a.max_connections = j.value("max_connections", 256);
  a.request_timeout_s = j.value("request_timeout_s", 60.0);
  if (j.contains("network")) {
    if (auto ok = check_app_network(j.at("network"), where + "/network"); !ok) return std::unexpected(ok.error());
    a.network = j.at("network");
  }
  std::map<std::string, std::size_t> seen;
  if (j.contains("schedules")) {
    const json& list = j.at("schedules");
    for (std::size_t i = 0; i < list.size(); ++i) {
      const std::string at = fmt::format("{}/schedules/{}", where, i);
      ScheduleConfig s;
      s.name = list[i].at("name").get<std::string>();
      s.cron = list[i].at("cron").get<std::string>();
      s.timeout_s = list[i].value("timeout_s", 600.0);
      if (auto ok = to_command(list[i].at("run"), at + "/run", s.argv, s.display); !ok) return std::unexpected(ok.error());
      auto [it, fresh] = seen.emplace(s.name, i);
      if (!fresh)
        return std::unexpected(config_error(at + "/name", fmt::format("schedule name {} is already used by {}/schedules/{}",
                                                                      as_json(s.name), where, it->second)));
      a.schedules.push_back(std::move(s));
    }
  }
  return a;
}

// Defaults ports (postgres 5432 up, redis 6379 up) and refuses two services on one port: they
// share the sandbox's loopback.
Result<void> assign_ports(std::vector<ServiceConfig>& services) {
  std::map<int, std::string> taken;
  for (auto& s : services)
    if (s.port) {
      auto [it, fresh] = taken.emplace(s.port, s.name);
      if (!fresh)
        return std::unexpected(config_error("/services/" + protocol::json_pointer_segment(s.name) + "/port",
                                            fmt::format("port {} is already used by service {}; services share the "
                                                        "sandbox's loopback",
                                                        s.port, as_json(it->second))));
    }
  for (auto& s : services) {
    if (s.port) continue;
    int p = s.kind == ServiceKind::postgres ? 5432 : 6379;
    while (taken.contains(p)) ++p;
    s.port = p;
    taken.emplace(p, s.name);
  }
  return {};
}

// Runs on a document the schema accepted, so every get<> below meets the type it expects.
Result<KilnConfig> to_config(json doc) {
  KilnConfig out;
  if (doc.contains("verify")) {
    const json& verify = doc.at("verify");
    std::map<std::string, std::size_t> seen;
    for (std::size_t i = 0; i < verify.size(); ++i) {
      const std::string where = fmt::format("/verify/{}", i);
      auto check = to_check(verify[i], where);
      if (!check) return std::unexpected(check.error());
      auto [it, fresh] = seen.emplace(check->name, i);
      if (!fresh) {
        return std::unexpected(config_error(
            where + "/name", fmt::format("check name {} is already used by /verify/{}; check names must be unique",
                                         as_json(check->name), it->second)));
      }
      out.checks.push_back(std::move(*check));
    }
  }
  if (doc.contains("services")) {
    for (const auto& [name, j] : doc.at("services").items()) {
      auto svc = to_service(name, j, "/services/" + protocol::json_pointer_segment(name));
      if (!svc) return std::unexpected(svc.error());
      out.services.push_back(std::move(*svc));
    }
    if (auto ok = assign_ports(out.services); !ok) return std::unexpected(ok.error());
    // KILN_SERVICE_<NAME>_URL upper-cases the name and writes '-' as '_': two names must not meet there.
    std::map<std::string, std::string> env_names;
    for (const auto& svc : out.services) {
      const std::string upper = service_env_name(svc.name);
      auto [it, fresh] = env_names.emplace(upper, svc.name);
      if (!fresh)
        return std::unexpected(config_error("/services/" + protocol::json_pointer_segment(svc.name),
                                            fmt::format("service names {} and {} both become KILN_SERVICE_{}_URL; "
                                                        "rename one",
                                                        as_json(it->second), as_json(svc.name), upper)));
    }
  }
  for (std::size_t i = 0; i < out.checks.size(); ++i)
    for (std::size_t k = 0; k < out.checks[i].services.size(); ++k) {
      const std::string& want = out.checks[i].services[k];
      bool declared = std::any_of(out.services.begin(), out.services.end(), [&](auto& s) { return s.name == want; });
      if (!declared)
        return std::unexpected(config_error(fmt::format("/verify/{}/services/{}", i, k),
                                            fmt::format("no service named {} in \"services\"; declare it there first",
                                                        as_json(want))));
    }
  if (doc.contains("sandbox")) {
    out.sandbox = doc.at("sandbox");
    if (out.sandbox.contains("env")) {
      if (auto env = env_map(out.sandbox.at("env"), "/sandbox/env"); !env) return std::unexpected(env.error());
    }
  }
  if (doc.contains("checkpoints")) out.checkpoints_auto = doc.at("checkpoints").value("auto", true);
  if (doc.contains("publish")) {
    const json& p = doc.at("publish");
    out.publish.path = p.value("path", "");
    out.publish.name = p.value("name", "");
    out.publish.share = p.value("share", "");
    if (!out.publish.path.empty()) {
      if (auto problem = path_problem(out.publish.path)) {
        return std::unexpected(config_error("/publish/path", *problem));
      }
    }
  }
  if (doc.contains("app")) {
    auto app = to_app(doc.at("app"), "/app");
    if (!app) return std::unexpected(app.error());
    for (std::size_t k = 0; k < app->services.size(); ++k) {
      const std::string& want = app->services[k];
      bool declared = std::any_of(out.services.begin(), out.services.end(), [&](auto& s) { return s.name == want; });
      if (!declared)
        return std::unexpected(config_error(fmt::format("/app/services/{}", k),
                                            fmt::format("no service named {} in \"services\"; declare it there first",
                                                        as_json(want))));
    }
    out.app = std::move(*app);
  }
  out.raw = std::move(doc);
  return out;
}

}  // namespace

json to_json(const AppConfig& a) {
  json schedules = json::array();
  for (const auto& s : a.schedules)
    schedules.push_back({{"name", s.name}, {"cron", s.cron}, {"argv", s.argv}, {"display", s.display},
                         {"timeout_s", s.timeout_s}});
  json j = json{{"argv", a.argv},
              {"display", a.display},
              {"services", a.services},
              {"idle_s", a.idle_s},
              {"ready", a.ready_path},
              {"start_timeout_s", a.start_timeout_s},
              {"env", a.env},
              {"limits", a.limits},
              {"max_connections", a.max_connections},
              {"request_timeout_s", a.request_timeout_s},
              {"schedules", std::move(schedules)},
              {"network", a.network}};
  if (!a.network_ceiling.is_null()) j["network_ceiling"] = a.network_ceiling;
  return j;
}

Result<AppConfig> app_config_from_json(const json& j) {
  try {
    AppConfig a;
    a.argv = j.at("argv").get<std::vector<std::string>>();
    a.display = j.value("display", "");
    a.services = j.value("services", std::vector<std::string>{});
    a.idle_s = j.value("idle_s", 300);
    a.ready_path = j.value("ready", "");
    a.start_timeout_s = j.value("start_timeout_s", 30.0);
    a.env = j.value("env", std::map<std::string, std::string>{});
    a.limits = j.value("limits", json::object());
    a.max_connections = j.value("max_connections", 256);
    a.request_timeout_s = j.value("request_timeout_s", 60.0);
    a.network = j.value("network", json("none"));  // versions stored before app.network had none
    a.network_ceiling = j.value("network_ceiling", json());
    if (!a.network_ceiling.is_null() && !a.network_ceiling.is_object())
      return fail(Errc::invalid_argument, "stored app config has a network_ceiling that is not an allowlist object");
    if (!a.network.is_string() && !a.network.is_object())
      return fail(Errc::invalid_argument, "stored app config has a network that is neither a word nor an allowlist");
    for (const auto& s : j.value("schedules", json::array()))
      a.schedules.push_back({s.at("name").get<std::string>(), s.at("cron").get<std::string>(),
                             s.at("argv").get<std::vector<std::string>>(), s.value("display", ""),
                             s.value("timeout_s", 600.0)});
    if (a.argv.empty()) return fail(Errc::invalid_argument, "stored app config has no command");
    return a;
  } catch (const json::exception& e) {
    return fail(Errc::invalid_argument, fmt::format("stored app config is malformed: {}", e.what()));
  }
}

json to_json(const ServiceConfig& s) {
  return json{{"name", s.name},
              {"kind", to_string(s.kind)},
              {"argv", s.argv},
              {"display", s.display},
              {"port", s.port},
              {"ready", s.ready_path},
              {"setup_argv", s.setup_argv},
              {"setup_display", s.setup_display},
              {"env", s.env},
              {"cwd", s.cwd},
              {"ready_timeout_s", s.ready_timeout_s},
              {"description", s.description}};
}

Result<ServiceConfig> service_config_from_json(const json& j) {
  try {
    ServiceConfig s;
    s.name = j.at("name").get<std::string>();
    const std::string kind = j.at("kind").get<std::string>();
    if (kind == "postgres") s.kind = ServiceKind::postgres;
    else if (kind == "redis") s.kind = ServiceKind::redis;
    else if (kind == "command") s.kind = ServiceKind::command;
    else return fail(Errc::invalid_argument, fmt::format("stored service {} has an unknown kind {}", s.name, as_json(kind)));
    s.argv = j.value("argv", std::vector<std::string>{});
    s.display = j.value("display", "");
    s.port = j.at("port").get<int>();
    s.ready_path = j.value("ready", "");
    s.setup_argv = j.value("setup_argv", std::vector<std::string>{});
    s.setup_display = j.value("setup_display", "");
    s.env = j.value("env", std::map<std::string, std::string>{});
    s.cwd = j.value("cwd", "");
    s.ready_timeout_s = j.value("ready_timeout_s", 60.0);
    s.description = j.value("description", "");
    if (!valid_service_name(s.name))
      return fail(Errc::invalid_argument, fmt::format("stored service name {} is not valid", as_json(s.name)));
    if (s.kind == ServiceKind::command && s.argv.empty())
      return fail(Errc::invalid_argument, fmt::format("stored service {} has no command", s.name));
    if (s.port <= 0 || s.port > 65535) return fail(Errc::invalid_argument, fmt::format("stored service {} has no port", s.name));
    return s;
  } catch (const json::exception& e) {
    return fail(Errc::invalid_argument, fmt::format("stored service config is malformed: {}", e.what()));
  }
}

std::string service_env_name(const std::string& service) {
  std::string out;
  for (char c : service) out += c == '-' ? '_' : char(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

const char* to_string(ServiceKind k) {
  switch (k) {
    case ServiceKind::postgres: return "postgres";
    case ServiceKind::redis: return "redis";
    case ServiceKind::command: return "command";
  }
  return "command";
}

const json& kiln_config_schema() { return loaded_schema().schema; }

Result<KilnConfig> parse_kiln_config(std::string_view text) {
  const auto& schema = loaded_schema();
  if (!schema.problem.empty()) return fail(Errc::internal, "cannot check kiln.json: " + schema.problem);
  if (text.size() > kMaxConfigBytes) {
    return std::unexpected(config_error("", "larger than 1 MiB; it is a small configuration file"));
  }
  auto doc = parse_json(text);
  if (!doc) return std::unexpected(doc.error());
  if (auto v = protocol::validate(schema.schema, *doc)) return std::unexpected(config_error(v->path, reword(*v, *doc)));
  try {
    return to_config(std::move(*doc));
  } catch (const json::exception& e) {
    // Only reachable if the schema and to_config disagree about a type.
    return fail(Errc::internal, fmt::format("kiln.json: schema and loader disagree: {}", e.what()));
  }
}

LoadedConfig load_config(const workspace::Root& root) {
  LoadedConfig out;
  out.source = "defaults";
  auto fd = root.open("kiln.json", O_RDONLY);
  if (!fd) {
    if (fd.error().code != Errc::not_found) out.error = "kiln.json: " + fd.error().message;
    return out;
  }
  std::string text;
  if (!read_all(fd->get(), text, kMaxConfigBytes)) {
    out.error = errno == EFBIG ? "kiln.json: larger than 1 MiB; it is a small configuration file"
                               : "kiln.json: could not be read (an I/O error)";
    return out;
  }
  auto parsed = parse_kiln_config_memo(text);
  if (!parsed) {
    out.error = parsed.error().message;
    return out;
  }
  out.config = parsed->raw;
  out.source = "kiln.json";
  out.typed = std::move(*parsed);
  return out;
}

}  // namespace kiln::server
