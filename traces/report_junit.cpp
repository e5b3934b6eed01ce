// Reads JUnit XML, the report format most runners can write (ctest, node --test, pytest, gtest,
// surefire, jest-junit), into a TestReport.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <pugixml.hpp>
#include <vector>

#include "traces/report_common.h"
#include "traces/test_report.h"

namespace kiln::traces {
namespace {

using detail::clip_text;
using detail::kMaxNameBytes;
using detail::trim;

constexpr std::size_t kMaxScanBytes = 64 * 1024;
constexpr std::size_t kMaxSuiteDepth = 32;

bool is_element(pugi::xml_node n, const char* name) {
  return n.type() == pugi::node_element && std::strcmp(n.name(), name) == 0;
}

std::string_view attr(pugi::xml_node n, const char* name) { return trim(n.attribute(name).value()); }

std::string_view body(pugi::xml_node n) { return trim(n.child_value()); }

// Process output ends with the error, so scan and quote its end rather than its start.
std::string_view tail(std::string_view s) {
  return s.size() > kMaxScanBytes ? s.substr(s.size() - kMaxScanBytes) : s;
}

// "classname > name" when the classname says something (pytest's module, a Java class); node
// writes classname="test" and ctest repeats the name, so there the enclosing suites (node's
// describe blocks) are the useful prefix. The root element is the run or file, not a suite.
std::string test_name(pugi::xml_node testcase, pugi::xml_node root) {
  const std::string_view name = attr(testcase, "name");
  const std::string_view cls = attr(testcase, "classname");
  std::vector<std::string_view> parts;
  if (!cls.empty() && cls != name && cls != "test") {
    parts.push_back(cls);
  } else {
    for (auto p = testcase.parent(); p && p != root && parts.size() < kMaxSuiteDepth; p = p.parent()) {
      if (!is_element(p, "testsuite")) continue;
      const std::string_view suite = attr(p, "name");
      if (!suite.empty() && suite != name) parts.push_back(suite);
    }
    std::reverse(parts.begin(), parts.end());
  }
  std::string out;
  for (auto part : parts) {
    out.append(part);
    out.append(" > ");
  }
  out.append(name.empty() ? std::string_view("(unnamed test)") : name);
  return clip_text(out, kMaxNameBytes);
}

// Some reporters (node's junit) write a multi-line message into the attribute with its line
// breaks dropped ("equal:+ actual - expected+ 'a'- 'b'") and the same text, intact, in the body.
// When the body holds the message (whitespace aside), its own lines are the readable form.
std::string_view message_with_lines(std::string_view message, std::string_view body_text) {
  if (message.find('\n') != std::string_view::npos || body_text.find('\n') == std::string_view::npos) return message;
  auto space = [](char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; };
  std::string needle;
  for (char c : message)
    if (!space(c)) needle += c;
  if (needle.size() < 8) return message;
  std::string hay;
  std::vector<std::size_t> at;  // where each kept body character was
  for (std::size_t i = 0; i < body_text.size() && hay.size() < 64 * 1024; ++i) {
    if (space(body_text[i])) continue;
    hay += body_text[i];
    at.push_back(i);
  }
  const std::size_t k = hay.find(needle);
  if (k == std::string::npos) return message;
  const std::size_t from = at[k], to = at[k + needle.size() - 1] + 1;
  return body_text.substr(from, to - from);
}

std::string failure_message(pugi::xml_node testcase, pugi::xml_node problem) {
  if (auto m = attr(problem, "message"); !m.empty())
    return clip_text(message_with_lines(m, body(problem)), kMaxFailureMessageBytes);
  if (auto text = body(problem); !text.empty()) return clip_text(text, kMaxFailureMessageBytes);
  // ctest leaves message="" and puts what the test printed in <system-out>.
  for (const char* stream : {"system-err", "system-out"}) {
    if (auto out = body(testcase.child(stream)); !out.empty()) {
      return clip_text(out, kMaxFailureMessageBytes, /*keep_tail=*/true);
    }
  }
  if (auto type = attr(problem, "type"); !type.empty()) return clip_text(type, kMaxFailureMessageBytes);
  return is_element(problem, "error") ? "error" : "failed";
}

detail::SourceLocation failure_location(pugi::xml_node testcase, pugi::xml_node problem) {
  const std::string_view texts[] = {body(problem), attr(problem, "message"),
                                    tail(body(testcase.child("system-err"))),
                                    tail(body(testcase.child("system-out")))};
  auto dig = [&]() -> std::optional<detail::SourceLocation> {
    for (auto text : texts) {
      if (auto loc = detail::find_source_location(text)) return loc;
    }
    return std::nullopt;
  };
  // pytest (xunit1), gtest and some node reporters name the test's own file and line.
  if (auto file = attr(testcase, "file"); !file.empty()) {
    detail::SourceLocation loc{clip_text(file, kMaxNameBytes),
                               detail::parse_line_number(attr(testcase, "line"))};
    if (!loc.line) {
      if (auto dug = dig(); dug && dug->file.ends_with(file)) loc.line = dug->line;
    }
    return loc;
  }
  if (auto dug = dig()) {
    dug->file = clip_text(dug->file, kMaxNameBytes);
    return *dug;
  }
  return {};
}

void read_testcase(pugi::xml_node testcase, pugi::xml_node root, TestReport& report) {
  pugi::xml_node skipped, problem;
  for (auto child : testcase.children()) {
    if (!skipped && is_element(child, "skipped")) skipped = child;
    if (!problem && (is_element(child, "failure") || is_element(child, "error"))) problem = child;
  }
  // node writes a failing todo test as <skipped type="todo"/> plus <failure>: not a failure.
  if (skipped) {
    ++report.skipped;
  } else if (!problem) {
    ++report.passed;
  } else {
    auto loc = failure_location(testcase, problem);
    detail::add_failure(report, TestFailure{test_name(testcase, root), failure_message(testcase, problem),
                                            std::move(loc.file), loc.line});
  }
}

Error not_well_formed(std::string_view xml, const pugi::xml_parse_result& result) {
  if (result.status == pugi::status_out_of_memory) {
    return Error{Errc::too_large, fmt::format("JUnit report ({} bytes) is too large to parse", xml.size())};
  }
  const auto offset = static_cast<std::size_t>(std::max<std::ptrdiff_t>(result.offset, 0));
  const auto line = 1 + std::count(xml.begin(), xml.begin() + std::min(offset, xml.size()), '\n');
  std::string what = result.description();
  if (!what.empty()) what[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(what[0])));
  if (result.status == pugi::status_no_document_element)
    what += " (expected a <testsuites> or <testsuite> root)";
  return Error{
      Errc::invalid_argument,
      fmt::format("JUnit report is not well-formed XML at byte {} (line {}): {}", offset, line, what)};
}

}  // namespace

Result<TestReport> parse_junit(std::string_view xml) {
  if (trim(xml).empty()) {
    return fail(Errc::invalid_argument,
                "JUnit report is empty: expected an XML document with a <testsuites> or <testsuite> root");
  }
  pugi::xml_document doc;
  const auto parsed = doc.load_buffer(xml.data(), xml.size(), pugi::parse_default, pugi::encoding_auto);
  if (!parsed) return std::unexpected(not_well_formed(xml, parsed));

  const pugi::xml_node root = doc.document_element();
  if (!is_element(root, "testsuites") && !is_element(root, "testsuite")) {
    return fail(
        Errc::invalid_argument,
        fmt::format("not a JUnit report: expected a <testsuites> or <testsuite> root element, found <{}>",
                    clip_text(root.name(), 64)));
  }

  TestReport report;
  report.format = "junit";
  // Iterative walk: suites nest as deep as the runner's describe blocks, and a hostile file must
  // not be able to exhaust the stack.
  for (pugi::xml_node cur = root.first_child(); cur && cur != root;) {
    bool descend = false;
    if (is_element(cur, "testcase")) {
      read_testcase(cur, root, report);
    } else if (is_element(cur, "testsuite") || is_element(cur, "testsuites")) {
      descend = true;
    }
    if (descend && cur.first_child()) {
      cur = cur.first_child();
      continue;
    }
    while (cur != root && !cur.next_sibling()) cur = cur.parent();
    if (cur == root) break;
    cur = cur.next_sibling();
  }
  return report;
}

}  // namespace kiln::traces
