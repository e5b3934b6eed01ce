// Writes JUnit XML through pugixml so escaping is the library's job; this file only decides what
// a check's outcome looks like to a CI report viewer.
#include "traces/junit_writer.h"

#include <fmt/format.h>

#include <cstdint>
#include <optional>
#include <pugixml.hpp>
#include <sstream>
#include <string_view>
#include <vector>

#include "traces/report_common.h"

namespace kiln::traces {
namespace {

using nlohmann::json;

constexpr std::size_t kMaxTextBytes = 64 * 1024;

// XML 1.0 has no way to carry C0 controls other than tab, newline and return, not even as
// character references, and test output is full of ANSI colour sequences.
std::string xml_text(std::string_view s, std::size_t max_bytes = kMaxTextBytes) {
  const std::string valid = detail::clip_text(s, max_bytes);
  std::string out;
  out.reserve(valid.size());
  for (size_t i = 0; i < valid.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(valid[i]);
    if (c == 0x1b && i + 1 < valid.size() && valid[i + 1] == '[') {
      // A CSI sequence: parameter and intermediate bytes (0x20-0x3f), then one final byte.
      size_t j = i + 2;
      while (j < valid.size() && j - i < 64 && valid[j] >= 0x20 && valid[j] <= 0x3f) ++j;
      if (j < valid.size() && valid[j] >= 0x40 && valid[j] <= 0x7e) {
        i = j;
        continue;
      }
    }
    if (c < 0x20 && c != '\t' && c != '\n' && c != '\r') {
      out += '?';
      continue;
    }
    out += valid[i];
  }
  return out;
}

std::string str_of(const json& obj, const char* key) {
  if (!obj.is_object()) return {};
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::optional<int64_t> int_of(const json& obj, const char* key) {
  if (!obj.is_object()) return std::nullopt;
  auto it = obj.find(key);
  if (it == obj.end()) return std::nullopt;
  if (it->is_number_integer()) return it->get<int64_t>();
  if (it->is_number_float()) return static_cast<int64_t>(it->get<double>());
  return std::nullopt;
}

std::string seconds(const json& obj) {
  auto ms = int_of(obj, "duration_ms");
  return fmt::format("{:.3f}", ms && *ms > 0 ? double(*ms) / 1000.0 : 0.0);
}

// "exit code 1; 3 tests failed", or "stopped: timeout (exit code 124)": what a report viewer
// shows next to the red mark, so it has to say how the check ended in a line.
std::string failure_summary(const json& check) {
  std::vector<std::string> parts;
  const std::string stop = str_of(check, "stop_reason");
  const auto exit_code = int_of(check, "exit_code");
  if (!stop.empty() && stop != "exit") {
    parts.push_back(exit_code ? fmt::format("stopped: {} (exit code {})", stop, *exit_code) : "stopped: " + stop);
  } else if (exit_code) {
    parts.push_back(fmt::format("exit code {}", *exit_code));
  }
  const json& tests = check.contains("tests") ? check["tests"] : json();
  if (auto failed = int_of(tests, "failed"); failed && *failed > 0)
    parts.push_back(fmt::format("{} test{} failed", *failed, *failed == 1 ? "" : "s"));
  if (auto err = str_of(check, "error"); !err.empty()) parts.push_back(err);
  if (parts.empty()) return "failed";
  std::string out = parts[0];
  for (size_t i = 1; i < parts.size(); ++i) out += "; " + parts[i];
  return out;
}

// The failed tests, one paragraph each, then where to read more.
std::string failure_text(const json& check) {
  std::string out;
  const json& tests = check.contains("tests") ? check["tests"] : json();
  if (tests.is_object() && tests.contains("failures") && tests["failures"].is_array()) {
    for (const auto& f : tests["failures"]) {
      std::string where = str_of(f, "file");
      if (auto line = int_of(f, "line"); line && !where.empty()) where += fmt::format(":{}", *line);
      out += fmt::format("{}{}\n", str_of(f, "name"), where.empty() ? "" : " (" + where + ")");
      if (auto msg = str_of(f, "message"); !msg.empty()) out += "  " + msg + "\n";
      out += "\n";
    }
    if (auto t = tests.find("failures_truncated"); t != tests.end() && t->is_boolean() && t->get<bool>())
      out += "(more failures than the report keeps)\n";
  }
  if (auto id = str_of(check, "trace_id"); !id.empty())
    out += fmt::format("trace: {} (kiln traces show {}; kiln traces output {})\n", id, id, id);
  return out;
}

void add_property(pugi::xml_node props, const std::string& name, const std::string& value) {
  auto p = props.append_child("property");
  p.append_attribute("name").set_value(xml_text(name, 1024).c_str());
  p.append_attribute("value").set_value(xml_text(value, 1024).c_str());
}

struct Counts {
  int tests = 0, failures = 0, errors = 0, skipped = 0;
};

void add_testcase(pugi::xml_node suite, const json& check, Counts& counts) {
  ++counts.tests;
  auto tc = suite.append_child("testcase");
  tc.append_attribute("classname").set_value("kiln.verify");
  std::string name = str_of(check, "name");
  tc.append_attribute("name").set_value(xml_text(name.empty() ? "(unnamed check)" : name, 1024).c_str());
  tc.append_attribute("time").set_value(seconds(check).c_str());

  const std::string status = str_of(check, "status");
  if (status == "pass") return;
  if (status == "fail") {
    ++counts.failures;
    auto f = tc.append_child("failure");
    f.append_attribute("message").set_value(xml_text(failure_summary(check), 4096).c_str());
    f.append_attribute("type").set_value("fail");
    f.text().set(xml_text(failure_text(check)).c_str());
  } else if (status == "skipped" || status == "cancelled") {
    ++counts.skipped;
    auto s = tc.append_child("skipped");
    std::string why = str_of(check, "error");
    s.append_attribute("message").set_value(xml_text(why.empty() ? status : status + ": " + why, 4096).c_str());
  } else {
    ++counts.errors;
    std::string why = str_of(check, "error");
    if (why.empty()) why = status == "error" ? failure_summary(check) : status.empty() ? std::string("check has no status")
                                                         : fmt::format("check status '{}'", status);
    auto e = tc.append_child("error");
    e.append_attribute("message").set_value(xml_text(why, 4096).c_str());
    e.append_attribute("type").set_value(xml_text(status.empty() ? "error" : status, 64).c_str());
    e.text().set(xml_text(failure_text(check)).c_str());
  }
}

}  // namespace

std::string verify_to_junit(const json& verify_result) {
  pugi::xml_document doc;
  auto decl = doc.append_child(pugi::node_declaration);
  decl.append_attribute("version").set_value("1.0");
  decl.append_attribute("encoding").set_value("UTF-8");
  auto suite = doc.append_child("testsuite");
  suite.append_attribute("name").set_value("kiln verify");

  const json empty = json::array();
  const json& checks = verify_result.is_object() && verify_result.contains("checks") &&
                               verify_result["checks"].is_array()
                           ? verify_result["checks"]
                           : empty;
  auto props = suite.append_child("properties");
  add_property(props, "trace_id", str_of(verify_result, "trace_id"));
  add_property(props, "status", str_of(verify_result, "status"));
  for (const auto& c : checks) {
    if (auto id = str_of(c, "trace_id"); !id.empty()) add_property(props, str_of(c, "name") + ".trace_id", id);
  }

  Counts counts;
  for (const auto& c : checks) add_testcase(suite, c, counts);
  // The counts go first in the element as readers expect; they are only known now.
  suite.insert_attribute_after("tests", suite.attribute("name")).set_value(counts.tests);
  suite.insert_attribute_after("failures", suite.attribute("tests")).set_value(counts.failures);
  suite.insert_attribute_after("errors", suite.attribute("failures")).set_value(counts.errors);
  suite.insert_attribute_after("skipped", suite.attribute("errors")).set_value(counts.skipped);
  suite.insert_attribute_after("time", suite.attribute("skipped")).set_value(seconds(verify_result).c_str());

  std::ostringstream out;
  doc.save(out, "  ", pugi::format_default, pugi::encoding_utf8);
  return out.str();
}

}  // namespace kiln::traces
