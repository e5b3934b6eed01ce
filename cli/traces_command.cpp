// The `kiln traces` subcommands. They open the SQLite stores in the state directory themselves
// (WAL lets them read while a server writes), so they work whether or not a server is running.
#include "cli/traces_command.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/report.h"
#include "mcp/principal.h"
#include "tools/traces.h"
#include "traces/otlp_export.h"
#include "traces/trace_store.h"
#include "workspace/state_store.h"

namespace kiln::cli {
namespace {

using nlohmann::json;
using server::local_principal;
using server::trace_visible_to;
using server::traces_of;
using traces::TraceRecord;
using traces::TraceStore;

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

// nullptr when nothing was ever recorded there: reading must not create a state directory.
Result<std::unique_ptr<TraceStore>> open_traces(const std::string& state_dir) {
  if (!exists(state_dir + "/traces.db")) return std::unique_ptr<TraceStore>();
  return TraceStore::open(state_dir);
}

Error no_trace(const std::string& id, const std::string& state_dir) {
  return Error{Errc::not_found,
               fmt::format("no trace {} in {}; `kiln traces list` shows the traces there are", id, state_dir)};
}

Result<TraceRecord> find_trace(TraceStore* store, const std::string& id, const std::string& state_dir) {
  if (!store) return std::unexpected(no_trace(id, state_dir));
  auto rec = store->get(id);
  if (!rec) return std::unexpected(rec.error());
  // The CLI acts as the local user: another principal's trace is as absent as a missing one.
  if (!*rec || !trace_visible_to(**rec, local_principal())) return std::unexpected(no_trace(id, state_dir));
  return std::move(**rec);
}

// Traces keep the id of a workspace that kiln.db may no longer know, so an unknown NAME_OR_ID
// that some trace carries still filters.
Result<std::string> resolve_workspace(const std::string& name_or_id, const std::string& state_dir,
                                      TraceStore& store) {
  if (exists(state_dir + "/kiln.db")) {
    auto ws = workspace::StateStore::open(state_dir);
    if (!ws) return std::unexpected(ws.error());
    auto found = (*ws)->find_workspace(name_or_id);
    if (!found) return std::unexpected(found.error());
    if (*found) return (*found)->id;
  }
  traces::TraceQuery q;
  q.workspace_id = name_or_id;
  q.who = traces_of(local_principal());
  q.limit = 1;
  if (auto page = store.list(q); page && !page->records.empty()) return name_or_id;
  return fail(Errc::not_found, fmt::format("no workspace '{}' in {}", name_or_id, state_dir));
}

std::string workspace_name(const std::string& id, const std::string& state_dir) {
  if (id.empty() || !exists(state_dir + "/kiln.db")) return {};
  auto ws = workspace::StateStore::open(state_dir);
  if (!ws) return {};
  auto found = (*ws)->find_workspace(id);
  return found && *found ? (*found)->name : std::string();
}

// Every record of a query, paging as far as `max` (0: all).
Result<std::vector<TraceRecord>> collect(TraceStore& store, traces::TraceQuery q, size_t max) {
  std::vector<TraceRecord> out;
  for (;;) {
    q.limit = int(max == 0 ? 500 : std::min<size_t>(500, max - out.size()));
    auto page = store.list(q);
    if (!page) return std::unexpected(page.error());
    for (auto& r : page->records) out.push_back(std::move(r));
    if (page->next_cursor.empty() || (max != 0 && out.size() >= max)) return out;
    q.cursor = page->next_cursor;
  }
}

bool write_all(std::FILE* f, std::string_view data) {
  return data.empty() || std::fwrite(data.data(), 1, data.size(), f) == data.size();
}


// --- text rendering -------------------------------------------------------------------------

// One table cell: newlines of a script become spaces, long text is cut at a character boundary.
std::string one_line(std::string_view s, size_t max_bytes) {
  std::string out;
  for (char c : s) out += (c == '\n' || c == '\r' || c == '\t') ? ' ' : c;
  if (out.size() <= max_bytes) return out;
  size_t cut = max_bytes - 1;
  while (cut > 0 && (static_cast<unsigned char>(out[cut]) & 0xC0) == 0x80) --cut;
  return out.substr(0, cut) + "…";
}

// "2026-11-30T20:15:02.123Z" as "2026-11-30 20:15:02": seconds are enough to tell runs apart.
std::string human_ms(int64_t ms) {
  if (ms < 1000) return fmt::format("{}ms", ms);
  if (ms < 60'000) return fmt::format("{:.1f}s", double(ms) / 1000.0);
  if (ms < 3'600'000) return fmt::format("{}m{:02}s", ms / 60'000, (ms / 1000) % 60);
  return fmt::format("{}h{:02}m", ms / 3'600'000, (ms / 60'000) % 60);
}

// A byte count as a trace records it (a JSON number; anything else is unknown).
std::string human_bytes(const json& v) {
  if (!v.is_number()) return "?";
  return cli::human_bytes(std::uint64_t(std::max(0.0, v.get<double>())));
}

std::string duration_of(const TraceRecord& r) {
  if (r.duration_ms) return human_ms(*r.duration_ms);
  return r.status == "running" ? "running" : "-";
}

std::string what_of(const TraceRecord& r) {
  if (r.name.empty()) return r.command;
  return r.command.empty() ? r.name : r.name + ": " + r.command;
}

std::string trace_table(const std::vector<TraceRecord>& records) {
  if (records.empty()) return {};
  std::string out = fmt::format("{:<19}  {:<7}  {:<40}  {:<11}  {:<19}  {}\n", "ID", "KIND", "NAME/COMMAND",
                                "STATUS", "STARTED (UTC)", "DURATION");
  for (const auto& r : records) {
    out += fmt::format("{:<19}  {:<7}  {:<40}  {:<11}  {:<19}  {}\n", r.id, r.kind, one_line(what_of(r), 40),
                       r.status, when(r.started_at), duration_of(r));
  }
  return out;
}

std::string names(const json& arr) {
  std::string out;
  if (!arr.is_array()) return out;
  for (const auto& n : arr) {
    if (!n.is_string()) continue;
    if (!out.empty()) out += ", ";
    out += n.get<std::string>();
  }
  return out;
}

std::string field(const json& obj, const char* key) {
  if (!obj.is_object() || !obj.contains(key)) return {};
  const json& v = obj[key];
  return v.is_string() ? v.get<std::string>() : v.is_null() ? std::string() : dump_json(v, -1);
}

std::string trace_text(const TraceRecord& r, const std::vector<TraceRecord>& steps, const std::string& ws_name) {
  std::string out = fmt::format("{}  {}  {}\n", r.id, r.kind, r.status);
  auto line = [&](const char* label, const std::string& value) {
    if (!value.empty()) out += fmt::format("  {:<10} {}\n", label, value);
  };
  line("name", r.name);
  line("command", r.command);
  line("cwd", r.cwd);
  line("workspace", ws_name.empty() ? r.workspace_id : fmt::format("{} ({})", ws_name, r.workspace_id));
  line("parent", r.parent_id.value_or(""));
  if (r.client.is_object()) line("client", one_line(field(r.client, "name") + " " + field(r.client, "version"), 200));
  line("started", when(r.started_at) + " UTC");
  if (r.ended_at) line("ended", fmt::format("{} UTC, after {}", when(*r.ended_at), duration_of(r)));
  std::string how;
  if (r.exit_code) how = fmt::format("exit code {}", *r.exit_code);
  if (r.signal) how += fmt::format("{}signal {}", how.empty() ? "" : ", ", *r.signal);
  if (!r.stop_reason.empty()) how += fmt::format("{}stop reason {}", how.empty() ? "" : ", ", r.stop_reason);
  line("outcome", how);
  line("error", r.error);
  if (r.resources.is_object()) {
    std::string res;
    if (r.resources.contains("peak_memory_bytes") && r.resources["peak_memory_bytes"].is_number()) {
      res = "peak memory " + human_bytes(r.resources["peak_memory_bytes"]);
      if (auto src = field(r.resources, "peak_memory_source"); !src.empty()) res += " (" + src + ")";
      res += "; ";
    }
    res += fmt::format("CPU {} ms user, {} ms sys", field(r.resources, "user_ms"), field(r.resources, "sys_ms"));
    line("resources", res);
  }
  if (r.output.is_object()) {
    std::string o = fmt::format("stdout {}, stderr {}", human_bytes(r.output.value("stdout_bytes", json())),
                                human_bytes(r.output.value("stderr_bytes", json())));
    if (auto d = r.output.value("dropped_bytes", json()); d.is_number() && d.get<double>() > 0)
      o += fmt::format(", {} dropped at the output cap", human_bytes(d));
    line("output", o);
  }
  if (r.policy.is_object()) {
    line("policy", fmt::format("network {}, isolation {}", field(r.policy, "network"), field(r.policy, "isolation")));
    line("limits", field(r.policy, "limits"));
    line("env", names(r.policy.value("env_names", json())));
    line("secrets", names(r.policy.value("secret_names", json())));
  }
  if (r.changes.is_object()) {
    if (auto e = field(r.changes, "error"); !e.empty()) {
      line("changes", "not recorded: " + one_line(e, 200));
    } else {
      line("changes", fmt::format("{} added, {} modified, {} deleted (kiln checkpoint diff {} {})", field(r.changes, "added"),
                                  field(r.changes, "modified"), field(r.changes, "deleted"),
                                  field(r.changes, "checkpoint_before"), field(r.changes, "checkpoint_after")));
      const json paths = r.changes.value("paths", json::array());
      std::size_t shown = 0;
      for (const auto& p : paths.is_array() ? paths : json::array()) {
        if (++shown > 20) break;
        std::string c = field(p, "change");
        out += fmt::format("    {} {}\n", c == "added" ? "A" : c == "deleted" ? "D" : "M", one_line(field(p, "path"), 200));
      }
      if (paths.is_array() && paths.size() > 20) out += fmt::format("    ... {} more\n", paths.size() - 20);
    }
  }
  if (r.network_log.is_array()) {
    int allowed = 0, denied = 0;
    double up = 0, down = 0;
    for (const auto& e : r.network_log) {
      (field(e, "decision") == "allowed" ? allowed : denied)++;
      up += e.value("bytes_up", 0.0);
      down += e.value("bytes_down", 0.0);
    }
    line("network", fmt::format("{} allowed, {} refused; {} up, {} down", allowed, denied, human_bytes(up),
                                human_bytes(down)));
    // The refusals first: they are what a person reads this for ("what do I add?").
    std::size_t shown = 0;
    for (bool want_denied : {true, false}) {
      for (const auto& e : r.network_log) {
        if ((field(e, "decision") != "allowed") != want_denied) continue;
        if (++shown > 20) break;
        std::string target = field(e, "host") + ":" + field(e, "port");
        std::string detail = want_denied ? field(e, "reason")
                                         : fmt::format("{} up, {} down{}{}", human_bytes(e.value("bytes_up", json())),
                                                       human_bytes(e.value("bytes_down", json())),
                                                       field(e, "error").empty() ? "" : ", error: " + field(e, "error"),
                                                       e.value("open", false) ? ", still open" : "");
        out += fmt::format("    {:<5} {:<40} {}\n", want_denied ? "DENY" : "ALLOW", one_line(target, 40),
                           one_line(detail, 200));
      }
    }
    if (r.network_log.size() > 20)
      out += fmt::format("    ... {} more (kiln traces show {} --json)\n", r.network_log.size() - 20, r.id);
  }
  if (r.tests.is_object()) {
    line("tests", fmt::format("{} passed, {} failed, {} skipped", field(r.tests, "passed"), field(r.tests, "failed"),
                              field(r.tests, "skipped")));
    const json failures = r.tests.value("failures", json::array());
    for (const auto& f : failures.is_array() ? failures : json::array()) {
      std::string where = field(f, "file");
      if (auto l = field(f, "line"); !where.empty() && !l.empty()) where += ":" + l;
      out += fmt::format("    FAIL {}{}\n", one_line(field(f, "name"), 200), where.empty() ? "" : "  " + where);
      if (auto m = field(f, "message"); !m.empty()) out += fmt::format("         {}\n", one_line(m, 300));
    }
  }
  if (!steps.empty()) {
    out += "  steps\n";
    for (const auto& s : steps)
      out += fmt::format("    {}  {:<20}  {:<11}  {}\n", s.id, one_line(what_of(s), 20), s.status, duration_of(s));
  } else if (!r.result.is_null()) {
    line("result", one_line(dump_json(r.result, -1), 2000));
  }
  out += fmt::format("  more: kiln traces output {} [--stream stderr] [--grep PATTERN]; kiln traces show {} --json\n",
                     r.id, r.id);
  return out;
}

}  // namespace

CLI::App& TracesCommand::configure(CLI::App& app) {
  traces_ = app.add_subcommand("traces", "Read the traces of past runs (no server needed)");
  traces_->footer(
      "Every kiln run, kiln verify, kiln publish and agent sandbox run leaves a trace in the state directory. "
      "Exit: 0 ok, 1 not found or failed, 2 usage.");

  list_ = traces_->add_subcommand("list", "Traces, newest first");
  list_->add_option("--workspace", workspace_, "Only this workspace (name or id)");
  list_->add_option("--kind", kind_, "exec, verify, publish or service");
  list_->add_option("--status", status_, "running, pass, fail, error or interrupted");
  list_->add_option("--limit", limit_, "Most traces shown (default 20)");
  list_->add_flag("--json", json_, "A JSON array of whole records");

  show_ = traces_->add_subcommand("show", "One trace: command, policy, how it ended, resource use, tests");
  show_->add_option("id", id_, "Trace id (tr_...)");
  show_->add_flag("--json", json_, "The record as JSON");

  output_ = traces_->add_subcommand("output", "A trace's recorded output, as raw bytes");
  output_->add_option("id", id_, "Trace id (tr_...)");
  output_->add_option("--stream", stream_, "stdout (default) or stderr");
  output_->add_option("--grep", grep_, "Only lines matching this PCRE2 pattern, as LINE:TEXT");

  export_ = traces_->add_subcommand("export", "A trace and its steps in another format");
  export_->add_option("id", id_, "Trace id (tr_...)");
  export_->add_flag("--otlp", otlp_, "OpenTelemetry OTLP/JSON (ExportTraceServiceRequest), e.g. for Jaeger");
  export_->add_option("--output,-o", output_file_, "Write to this file instead of stdout");
  return *traces_;
}

int TracesCommand::run(const GlobalOptions& global) {
  const std::string& state_dir = global.state_dir;
  // CLI11 would answer a missing id with its own exit code; usage errors are 2 here.
  if ((show_->parsed() || output_->parsed() || export_->parsed()) && id_.empty())
    return usage("which trace? pass its id (tr_...), as `kiln traces list` shows");
  if (list_->parsed()) return list(state_dir);
  if (show_->parsed()) return show(state_dir);
  if (output_->parsed()) return output(state_dir);
  if (export_->parsed()) return export_otlp(state_dir);
  return usage("kiln traces needs a subcommand: list, show, output or export");
}

int TracesCommand::list(const std::string& state_dir) {
  if (limit_ < 1) return usage(fmt::format("--limit {} is not a positive number", limit_));
  auto store = open_traces(state_dir);
  if (!store) return report(store.error());
  std::vector<TraceRecord> records;
  if (*store) {
    traces::TraceQuery q;
    q.who = traces_of(local_principal());
    q.kind = kind_;
    q.status = status_;
    if (!workspace_.empty()) {
      auto ws = resolve_workspace(workspace_, state_dir, **store);
      if (!ws) return report(ws.error());
      q.workspace_id = *ws;
    }
    auto all = collect(**store, q, size_t(limit_));
    if (!all) return report(all.error());
    records = std::move(*all);
  } else if (!workspace_.empty()) {
    return report(Error{Errc::not_found, fmt::format("no workspace '{}' in {}", workspace_, state_dir)});
  }
  if (json_) {
    json arr = json::array();
    for (const auto& r : records) arr.push_back(traces::to_json(r));
    std::printf("%s\n", dump_json(arr).c_str());
    return 0;
  }
  std::fputs(trace_table(records).c_str(), stdout);
  if (records.empty()) std::fprintf(stderr, "kiln: no traces in %s match\n", state_dir.c_str());
  return 0;
}

int TracesCommand::show(const std::string& state_dir) {
  auto store = open_traces(state_dir);
  if (!store) return report(store.error());
  auto rec = find_trace(store->get(), id_, state_dir);
  if (!rec) return report(rec.error());
  if (json_) {
    std::printf("%s\n", dump_json(traces::to_json(*rec)).c_str());
    return 0;
  }
  traces::TraceQuery q;
  q.who = traces_of(local_principal());
  q.parent_id = rec->id;
  auto steps = collect(**store, q, 0);
  if (!steps) return report(steps.error());
  std::reverse(steps->begin(), steps->end());  // in the order they ran
  std::fputs(trace_text(*rec, *steps, workspace_name(rec->workspace_id, state_dir)).c_str(), stdout);
  return 0;
}

int TracesCommand::output(const std::string& state_dir) {
  if (stream_ != "stdout" && stream_ != "stderr")
    return usage(fmt::format("--stream {} is neither stdout nor stderr", stream_));
  auto store = open_traces(state_dir);
  if (!store) return report(store.error());
  if (auto rec = find_trace(store->get(), id_, state_dir); !rec) return report(rec.error());
  TraceStore& s = **store;
  if (grep_.empty()) {
    // A running trace is read up to where it is now; what it writes later is not waited for.
    for (int64_t offset = 0;;) {
      auto slice = s.read_output(id_, stream_, offset, traces::kOutputPageMax);
      if (!slice) return report(slice.error());
      if (!write_all(stdout, slice->data)) return report(Error{Errc::io, "cannot write to stdout"});
      if (slice->eof || slice->next_offset == uint64_t(offset)) break;
      offset = int64_t(slice->next_offset);
    }
  } else {
    for (uint64_t offset = 0;;) {
      auto g = s.grep_output(id_, stream_, grep_, offset, 1000);
      if (!g) return report(g.error());
      for (const auto& m : g->matches) {
        std::string line = fmt::format("{}:{}{}\n", m.line_number, m.text, m.truncated ? "…" : "");
        if (!write_all(stdout, line)) return report(Error{Errc::io, "cannot write to stdout"});
      }
      if (g->eof || (g->next_offset == offset && g->matches.empty())) break;
      offset = g->next_offset;
    }
  }
  return std::fflush(stdout) == 0 ? 0 : report(Error{Errc::io, "cannot write to stdout"});
}

int TracesCommand::export_otlp(const std::string& state_dir) {
  if (!otlp_) return usage("say which format: --otlp (OpenTelemetry OTLP/JSON) is the one there is");
  auto store = open_traces(state_dir);
  if (!store) return report(store.error());
  auto rec = find_trace(store->get(), id_, state_dir);
  if (!rec) return report(rec.error());
  traces::TraceQuery q;
  q.who = traces_of(local_principal());
  q.parent_id = rec->id;
  auto children = collect(**store, q, 0);
  if (!children) return report(children.error());
  std::reverse(children->begin(), children->end());
  const std::string text = dump_json(traces::to_otlp(*rec, *children, KILN_VERSION)) + "\n";
  if (output_file_.empty()) {
    if (!write_all(stdout, text) || std::fflush(stdout) != 0) return report(Error{Errc::io, "cannot write to stdout"});
    return 0;
  }
  std::ofstream f(output_file_, std::ios::binary | std::ios::trunc);
  f << text;
  f.close();
  if (!f) return report(Error{Errc::io, fmt::format("cannot write {}", output_file_)});
  const size_t spans = children->size() + 1;
  std::fprintf(stderr, "kiln: wrote %s (%zu span%s)\n", output_file_.c_str(), spans, spans == 1 ? "" : "s");
  return 0;
}

}  // namespace kiln::cli
