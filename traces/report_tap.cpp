// Reads TAP (versions 12 to 14, node's tap reporter, perl's Test::More, tape) into a TestReport,
// so runners without a JUnit writer still give verify per-test results.
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "traces/report_common.h"
#include "traces/tap_yaml.h"
#include "traces/test_report.h"

namespace kiln::traces {
namespace {

using detail::clip_text;
using detail::kMaxNameBytes;
using detail::trim;

constexpr std::size_t kMaxYamlLines = 4000;

enum class Directive { none, skip, todo };

struct Point {
  std::size_t indent = 0;
  bool ok = false;
  Directive directive = Directive::none;
  std::string_view description;  // TAP escapes (\# and \\) still in
  std::string_view number;
  bool in_yaml = false, had_yaml = false, diag_closed = false;
  std::size_t yaml_indent = 0;
  std::vector<std::string_view> yaml;
  std::string diag;  // "# ..." lines after a failing point: perl's Test::More explains failures there
};

struct Plan {
  std::size_t indent = 0;
  std::uint64_t count = 0;
};

// One open nesting level: the points at `indent` since their parent's last sibling.
struct Level {
  std::size_t indent = 0;
  std::size_t first_failure = 0;  // index in report.failures where this group's failures start
  bool failed = false;
};

bool is_digit(char c) { return c >= '0' && c <= '9'; }

bool starts_with_nocase(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (std::size_t i = 0; i < prefix.size(); ++i) {
    if ((s[i] | 0x20) != prefix[i]) return false;
  }
  return true;
}

std::size_t indent_of(std::string_view line) {
  std::size_t n = 0;
  while (n < line.size() && (line[n] == ' ' || line[n] == '\t')) ++n;
  return n;
}

std::optional<Plan> parse_plan(std::string_view t) {
  if (!t.starts_with("1..")) return std::nullopt;
  std::size_t end = 3;
  while (end < t.size() && is_digit(t[end])) ++end;
  if (end == 3 || end - 3 > 18) return std::nullopt;
  const auto rest = trim(t.substr(end));
  if (!rest.empty() && rest[0] != '#') return std::nullopt;
  Plan plan;
  for (char c : t.substr(3, end - 3)) plan.count = plan.count * 10 + static_cast<std::uint64_t>(c - '0');
  return plan;
}

std::optional<Point> parse_point(std::string_view t) {
  Point p;
  std::string_view rest;
  if (t.starts_with("ok")) {
    p.ok = true;
    rest = t.substr(2);
  } else if (t.starts_with("not ok")) {
    rest = t.substr(6);
  } else {
    return std::nullopt;
  }
  if (!rest.empty() && rest[0] != ' ' && rest[0] != '\t') return std::nullopt;  // "okay", "ok1"
  rest = trim(rest);
  std::size_t n = 0;
  while (n < rest.size() && is_digit(rest[n])) ++n;
  p.number = rest.substr(0, n);
  rest = rest.substr(n);
  std::size_t hash = std::string_view::npos;
  for (std::size_t i = 0; i < rest.size(); ++i) {
    if (rest[i] == '\\') {
      ++i;
    } else if (rest[i] == '#') {
      hash = i;
      break;
    }
  }
  auto desc = trim(rest.substr(0, hash));
  if (desc.starts_with('-')) desc = trim(desc.substr(1));
  p.description = desc;
  if (hash != std::string_view::npos) {
    const auto directive = trim(rest.substr(hash + 1));
    if (starts_with_nocase(directive, "skip")) p.directive = Directive::skip;
    if (starts_with_nocase(directive, "todo")) p.directive = Directive::todo;
  }
  return p;
}

std::string point_name(const Point& p) {
  std::string name;
  const auto d = p.description;
  for (std::size_t i = 0; i < d.size(); ++i) {
    if (d[i] == '\\' && i + 1 < d.size() && (d[i + 1] == '#' || d[i + 1] == '\\')) ++i;
    name.push_back(d[i]);
  }
  if (name.empty()) name = p.number.empty() ? "(unnamed test)" : fmt::format("test {}", p.number);
  return clip_text(name, kMaxNameBytes);
}

TestFailure failure_of(const Point& p, std::string name) {
  const auto fields = detail::read_tap_yaml(p.yaml);
  auto field = [&](std::string_view key) { return trim(detail::yaml_field(fields, key)); };
  std::string message(field("message"));
  if (message.empty()) message = field("error");
  if (message.empty() && (!field("expected").empty() || !field("actual").empty())) {
    message = fmt::format("expected: {}, actual: {}", field("expected"), field("actual"));  // tape
  }
  if (message.empty() && (!field("wanted").empty() || !field("found").empty())) {
    message = fmt::format("wanted: {}, found: {}", field("wanted"), field("found"));  // node-tap
  }
  if (message.empty()) message = trim(p.diag);

  TestFailure f{std::move(name), clip_text(message, kMaxFailureMessageBytes), "", std::nullopt};
  std::string_view file = field("file"), line = field("line");
  if (file.empty()) {  // node-tap nests them in an at: mapping
    file = field("at.file");
    line = field("at.line");
  }
  if (!file.empty()) {
    f.file = clip_text(file, kMaxNameBytes);
    f.line = detail::parse_line_number(line);
    return f;
  }
  // node's stack names the failing assertion; its location only the test's declaration.
  for (auto text : {field("stack"), field("at"), field("location"), std::string_view(p.diag),
                    std::string_view(message)}) {
    if (auto loc = detail::find_source_location(text)) {
      f.file = clip_text(loc->file, kMaxNameBytes);
      f.line = loc->line;
      break;
    }
  }
  return f;
}

class TapReader {
 public:
  Result<TestReport> read(std::string_view text);

 private:
  bool on_line(std::string_view line);  // false after "Bail out!"
  void finish_point();
  void check_plan();

  TestReport report_;
  std::optional<Point> pending_;
  std::vector<Level> open_;
  std::optional<Plan> plan_;  // the shallowest plan seen
  std::map<std::size_t, std::uint64_t> points_by_indent_;
  bool recognised_ = false, bailed_ = false;
};

Result<TestReport> TapReader::read(std::string_view text) {
  constexpr std::string_view kExpected =
      "expected a \"TAP version\" line, a plan such as \"1..N\", or \"ok\" / \"not ok\" lines";
  if (trim(text).empty())
    return fail(Errc::invalid_argument, fmt::format("TAP report is empty: {}", kExpected));
  report_.format = "tap";
  while (!text.empty()) {
    const auto nl = text.find('\n');
    auto line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    if (line.ends_with('\r')) line.remove_suffix(1);
    if (!on_line(line)) break;
  }
  finish_point();
  if (!recognised_)
    return fail(Errc::invalid_argument, fmt::format("no TAP found in the report: {}", kExpected));
  if (!bailed_) check_plan();
  return std::move(report_);
}

bool TapReader::on_line(std::string_view line) {
  const std::size_t indent = indent_of(line);
  const auto t = trim(line);
  if (pending_ && pending_->in_yaml) {
    // The end marker stands at the block's indentation; a deeper "..." is text of a scalar (node
    // writes one where its diff elides lines).
    if (t == "..." && indent <= pending_->yaml_indent) {
      pending_->in_yaml = false;
      return true;
    }
    // A less-indented line cannot belong to the block: its "..." went missing.
    if (t.empty() || indent >= pending_->yaml_indent) {
      if (pending_->yaml.size() < kMaxYamlLines) pending_->yaml.push_back(line);
      return true;
    }
    pending_->in_yaml = false;
  }
  if (t == "---" && pending_ && !pending_->had_yaml && indent > pending_->indent) {
    pending_->in_yaml = pending_->had_yaml = true;
    pending_->yaml_indent = indent;
    return true;
  }
  if (t.starts_with("Bail out!")) {
    finish_point();
    recognised_ = bailed_ = true;
    const auto reason = trim(t.substr(9));
    detail::add_failure(report_, TestFailure{"Bail out!",
                                             reason.empty() ? "the test run bailed out"
                                                            : clip_text(reason, kMaxFailureMessageBytes),
                                             "", std::nullopt});
    return false;
  }
  if (auto plan = parse_plan(t)) {
    finish_point();
    recognised_ = true;
    plan->indent = indent;
    if (!plan_ || indent < plan_->indent) plan_ = plan;
    return true;
  }
  if (auto point = parse_point(t)) {
    finish_point();
    recognised_ = true;
    pending_ = std::move(point);
    pending_->indent = indent;
    return true;
  }
  if (t.starts_with("TAP version ")) {
    finish_point();
    recognised_ = true;
    return true;
  }
  if (t.starts_with('#') && pending_) {
    const auto comment = trim(t.substr(1));
    // node and TAP 14 announce the next test with "# Subtest:"; later comments are not ours.
    if (comment.starts_with("Subtest:")) {
      pending_->diag_closed = true;
    } else if (!pending_->ok && !pending_->diag_closed && pending_->diag.size() < kMaxFailureMessageBytes) {
      if (!pending_->diag.empty()) pending_->diag.push_back('\n');
      pending_->diag.append(comment);
    }
  }
  return true;
}

// Subtests come before the point that sums them up, so a point is a parent exactly when deeper
// points are still open. Only leaves are counted (node's summary does the same for describe()
// suites); a parent counts only when it failed with no failing test under it (a failing hook).
void TapReader::finish_point() {
  if (!pending_) return;
  Point p = std::move(*pending_);
  pending_.reset();

  bool has_children = false, child_failed = false;
  std::size_t first_child_failure = report_.failures.size();
  while (!open_.empty() && open_.back().indent > p.indent) {
    has_children = true;
    child_failed = child_failed || open_.back().failed;
    first_child_failure = std::min(first_child_failure, open_.back().first_failure);
    open_.pop_back();
  }
  const bool failing = !p.ok && p.directive == Directive::none;
  const std::size_t failures_before = report_.failures.size();
  std::string name = point_name(p);
  if (has_children) {
    for (std::size_t i = first_child_failure; i < report_.failures.size(); ++i) {
      auto& child = report_.failures[i].name;
      child = clip_text(fmt::format("{} > {}", name, child), kMaxNameBytes);
    }
    if (failing && !child_failed) detail::add_failure(report_, failure_of(p, std::move(name)));
  } else if (p.directive != Directive::none) {
    ++report_.skipped;  // a TODO is neither a pass nor a failure, in TAP and in node's summary
  } else if (p.ok) {
    ++report_.passed;
  } else {
    detail::add_failure(report_, failure_of(p, std::move(name)));
  }

  ++points_by_indent_[p.indent];
  if (!open_.empty() && open_.back().indent == p.indent) {
    open_.back().failed = open_.back().failed || failing || child_failed;
  } else {
    open_.push_back(
        Level{p.indent, has_children ? first_child_failure : failures_before, failing || child_failed});
  }
}

// A stream cut short (a crash, a timeout, a full disk) shows as a plan that does not match, or as
// no plan at all: node and done_testing() print theirs last.
void TapReader::check_plan() {
  const std::size_t top =
      points_by_indent_.empty() ? (plan_ ? plan_->indent : 0) : points_by_indent_.begin()->first;
  if (!plan_ || plan_->indent > top) {
    detail::add_failure(
        report_,
        TestFailure{
            "missing plan",
            "the TAP stream has no top-level plan (1..N): the run probably stopped before it finished", "",
            std::nullopt});
    return;
  }
  const auto it = points_by_indent_.find(plan_->indent);
  const std::uint64_t seen = it == points_by_indent_.end() ? 0 : it->second;
  if (seen < plan_->count) {
    detail::add_failure(
        report_, TestFailure{"missing tests",
                             fmt::format("the plan 1..{} announced {} tests but only {} reported a result: "
                                         "the run probably stopped early",
                                         plan_->count, plan_->count, seen),
                             "", std::nullopt});
  } else if (seen > plan_->count) {
    detail::add_failure(report_,
                        TestFailure{"unplanned tests",
                                    fmt::format("the plan 1..{} announced {} tests but {} reported a result",
                                                plan_->count, plan_->count, seen),
                                    "", std::nullopt});
  }
}

}  // namespace

Result<TestReport> parse_tap(std::string_view text) { return TapReader{}.read(text); }

}  // namespace kiln::traces
