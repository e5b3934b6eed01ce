// A postgres service's databases: the development database or the verify template made once
// (with `setup` run against a staging copy, renamed when it succeeded), leftovers of killed runs
// dropped, and each verify run's own clone. Every statement is psql run inside the sandbox.
#include <fmt/format.h>

#include <functional>
#include <map>

#include "runs/run_tracing.h"
#include "services/service_host_impl.h"

namespace kiln::services {

using nlohmann::json;
using server::ServiceConfig;
namespace sbx = kiln::sandbox;

namespace {

// What a verify template was made from; a different setup makes it again.
std::string setup_fingerprint(const ServiceConfig& c) {
  std::string text = c.setup_display + "\n" + c.cwd;
  for (const auto& [k, v] : c.env) text += "\n" + k + "=" + v;
  return fmt::format("kiln-setup-{:016x}", std::hash<std::string>{}(text));
}

std::string sql_literal(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

}  // namespace

std::string describe(const sbx::ExecResult& r) {
  if (r.stop_reason == sbx::StopReason::exit) return fmt::format("exited with code {}", r.exit_code.value_or(0));
  if (r.stop_reason == sbx::StopReason::signal) return fmt::format("was killed by signal {}", r.signal);
  return fmt::format("stopped ({})", sbx::to_string(r.stop_reason));
}

Result<std::string> ServiceHost::psql(Hosted& h, std::size_t i, const std::string& database, const std::string& sql,
                                      std::stop_token stop) {
  const auto& e = h.entries[i];
  sbx::ExecRequest req;
  req.owner = h.owner;
  req.argv = psql_command(e.config, e.recipe.bindir, database, sql);
  req.display_command = "psql: " + sql;
  req.cwd = "/tmp";
  req.timeout_s = 120;
  auto r = sandboxes_.exec(h.sandbox_id, nullptr, std::move(req), stop);
  if (!r) return std::unexpected(r.error());
  if (r->stop_reason != sbx::StopReason::exit || r->exit_code != 0)
    return fail(Errc::io, fmt::format("service {}: `{}` {}: {}", e.config.name, sql, describe(*r), r->err.text));
  return r->out.text;
}

Result<void> ServiceHost::bootstrap_postgres(Hosted& h, std::size_t i, std::stop_token stop) {
  const auto& e = h.entries[i];
  const bool verify = h.request.use == DataUse::verify;
  const std::string target = verify ? kTemplateDatabase : kDevDatabase;
  const std::string staging = target + std::string("_setup");
  auto listed = psql(h, i, "postgres",
                     "SELECT datname || '|' || coalesce(shobj_description(oid, 'pg_database'), '') FROM pg_database",
                     stop);
  if (!listed) return std::unexpected(listed.error());
  std::map<std::string, std::string> dbs;  // name -> comment
  std::size_t pos = 0;
  while (pos < listed->size()) {
    std::size_t nl = listed->find('\n', pos);
    std::string line = listed->substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
    pos = nl == std::string::npos ? listed->size() : nl + 1;
    auto bar = line.find('|');
    if (bar != std::string::npos) dbs[line.substr(0, bar)] = line.substr(bar + 1);
  }
  const std::string fingerprint = setup_fingerprint(e.config);
  // Leftovers of runs killed half way: a staging database, verify clones nobody uses any more.
  for (const auto& [name, comment] : dbs) {
    bool stale = name == staging || (verify && name.starts_with("verify_"));
    if (stale)
      if (auto ok = psql(h, i, "postgres", "DROP DATABASE IF EXISTS \"" + name + "\"", stop); !ok)
        return std::unexpected(ok.error());
  }
  bool have = dbs.contains(target);
  if (have && verify && dbs[target] != fingerprint) {
    if (auto ok = psql(h, i, "postgres", "ALTER DATABASE \"" + target + "\" IS_TEMPLATE false", stop); !ok)
      return std::unexpected(ok.error());
    if (auto ok = psql(h, i, "postgres", "DROP DATABASE \"" + target + "\"", stop); !ok)
      return std::unexpected(ok.error());
    have = false;
  }
  if (!have) {
    if (auto ok = psql(h, i, "postgres", "CREATE DATABASE \"" + staging + "\"", stop); !ok)
      return std::unexpected(ok.error());
    if (!e.config.setup_argv.empty()) {
      // setup sees the database being made; a failed setup leaves nothing half made behind.
      sbx::ExecRequest req;
      req.owner = h.owner;
      req.argv = e.config.setup_argv;
      req.display_command = e.config.setup_display;
      req.cwd = e.config.cwd.empty() ? h.request.workspace_root : h.request.workspace_root + "/" + e.config.cwd;
      req.env = e.config.env;
      const std::string url = postgres_url(e.config, staging);
      req.env["DATABASE_URL"] = url;
      req.env["PGDATABASE"] = staging;
      req.env[env_name(e.config.name) + "_DATABASE_URL"] = url;
      req.env["KILN_SERVICE_" + env_name(e.config.name) + "_URL"] = url;
      req.tail_bytes = 4096;
      std::string trace_id;
      if (tracer_) {
        server::ExecTraceInfo info;
        info.kind = "service";
        info.workspace_id = h.request.workspace_id;
        {
          std::lock_guard lock(h.mu);
          info.parent_id = h.status[i].trace_id.empty() ? h.request.parent_trace
                                                        : std::optional<std::string>(h.status[i].trace_id);
        }
        info.name = e.config.name + " setup";
        info.client = h.request.client;
        info.principal = h.owner;
        info.policy = json{{"service", e.config.name}, {"step", "setup"}, {"database", staging}};
        if (auto id = tracer_->attach(req, info)) trace_id = *id;
      }
      auto r = sandboxes_.exec(h.sandbox_id, nullptr, std::move(req), stop);
      const bool ok = r && r->stop_reason == sbx::StopReason::exit && r->exit_code == 0;
      if (!ok) {
        (void)psql(h, i, "postgres", "DROP DATABASE IF EXISTS \"" + staging + "\"", stop);
        std::string why = r ? describe(*r) : r.error().message;
        std::string out = r ? r->out.text + r->err.text : "";
        {
          std::lock_guard lock(h.mu);
          h.status[i].state = "failed";
          h.status[i].error = "setup " + why;
        }
        return fail(Errc::invalid_argument,
                    fmt::format("service {}: setup `{}` {}; fix it and create the sandbox again (the database is made "
                                "again, nothing half made is kept){}. Its last output:\n{}",
                                e.config.name, e.config.setup_display, why,
                                trace_id.empty() ? "" : "; trace " + trace_id, out.empty() ? "(nothing)" : out));
      }
    }
    if (auto ok = psql(h, i, "postgres", "ALTER DATABASE \"" + staging + "\" RENAME TO \"" + target + "\"", stop); !ok)
      return std::unexpected(ok.error());
    if (verify) {
      if (auto ok = psql(h, i, "postgres", "COMMENT ON DATABASE \"" + target + "\" IS " + sql_literal(fingerprint),
                         stop);
          !ok)
        return std::unexpected(ok.error());
      if (auto ok = psql(h, i, "postgres", "ALTER DATABASE \"" + target + "\" IS_TEMPLATE true", stop); !ok)
        return std::unexpected(ok.error());
    }
  }
  if (verify) {
    // This run's own database: a copy of the template, so checks start from setup's state.
    if (auto ok = psql(h, i, "postgres",
                       "CREATE DATABASE \"" + e.database + "\" TEMPLATE \"" + target + "\" STRATEGY FILE_COPY", stop);
        !ok)
      return std::unexpected(ok.error());
  }
  return {};
}

}  // namespace kiln::services
