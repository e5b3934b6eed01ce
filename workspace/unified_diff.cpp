// A small Myers line diff: common head and tail are stripped first (edits are usually local), and
// a middle too different to trace cheaply is shown as removed-then-added rather than stalling.
#include "workspace/unified_diff.h"

#include <algorithm>
#include <vector>

#include <fmt/format.h>

namespace kiln::workspace {

namespace {

constexpr long kMaxTraceCells = 8'000'000;  // bounds the Myers trace at a few tens of MB

// Lines including their '\n', so a last line without one differs from the same text with one.
std::vector<std::string_view> split_lines(std::string_view s) {
  std::vector<std::string_view> out;
  size_t pos = 0;
  while (pos < s.size()) {
    size_t nl = s.find('\n', pos);
    size_t end = nl == std::string_view::npos ? s.size() : nl + 1;
    out.push_back(s.substr(pos, end - pos));
    pos = end;
  }
  return out;
}

struct Op {
  char kind;  // ' ', '-', '+'
  std::string_view line;
};

// Appends the Myers edit script turning a into b. Falls back to delete-all/insert-all when the
// edit distance is too large to trace within kMaxTraceCells.
void myers(const std::vector<std::string_view>& a, const std::vector<std::string_view>& b, std::vector<Op>& ops) {
  const long n = static_cast<long>(a.size()), m = static_cast<long>(b.size());
  const long max = n + m;
  std::vector<long> v(static_cast<size_t>(2 * max + 3), 0);
  const long off = max + 1;
  std::vector<std::vector<long>> trace;  // trace[d] = v[-d..d] before step d
  long cells = 0;
  long found = -1;
  for (long d = 0; d <= max; ++d) {
    cells += 2 * d + 1;
    if (cells > kMaxTraceCells) break;
    trace.emplace_back(v.begin() + off - d, v.begin() + off + d + 1);
    for (long k = -d; k <= d; k += 2) {
      long x = (k == -d || (k != d && v[off + k - 1] < v[off + k + 1])) ? v[off + k + 1] : v[off + k - 1] + 1;
      long y = x - k;
      while (x < n && y < m && a[x] == b[y]) ++x, ++y;
      v[off + k] = x;
      if (x >= n && y >= m) {
        found = d;
        break;
      }
    }
    if (found >= 0) break;
  }
  if (found < 0) {
    for (auto l : a) ops.push_back({'-', l});
    for (auto l : b) ops.push_back({'+', l});
    return;
  }
  std::vector<Op> rev;
  long x = n, y = m;
  for (long d = found; d >= 0; --d) {
    const auto& tv = trace[d];
    auto at = [&](long k) { return tv[k + d]; };
    long k = x - y;
    long px = 0, py = 0;
    if (d > 0) {
      long pk = (k == -d || (k != d && at(k - 1) < at(k + 1))) ? k + 1 : k - 1;
      px = at(pk);
      py = px - pk;
    }
    while (x > px && y > py) {
      rev.push_back({' ', a[x - 1]});
      --x, --y;
    }
    if (d > 0) {
      if (x == px) rev.push_back({'+', b[--y]});
      else rev.push_back({'-', a[--x]});
    }
  }
  ops.insert(ops.end(), rev.rbegin(), rev.rend());
}

void emit_line(std::string& out, char kind, std::string_view line) {
  out += kind;
  if (!line.empty() && line.back() == '\n') {
    out.append(line);
  } else {
    out.append(line);
    out += "\n\\ No newline at end of file\n";
  }
}

std::string range(long start, long count) {
  // diff(1): an empty range names the line before it; a count of 1 is left out.
  if (count == 0) return fmt::format("{},0", start);
  if (count == 1) return fmt::format("{}", start + 1);
  return fmt::format("{},{}", start + 1, count);
}

}  // namespace

std::string unified_diff(std::string_view before, std::string_view after, std::string_view path, int context) {
  if (before == after) return {};
  if (context < 0) context = 0;
  auto a = split_lines(before), b = split_lines(after);
  size_t pre = 0;
  while (pre < a.size() && pre < b.size() && a[pre] == b[pre]) ++pre;
  size_t suf = 0;
  while (suf < a.size() - pre && suf < b.size() - pre && a[a.size() - 1 - suf] == b[b.size() - 1 - suf]) ++suf;

  std::vector<Op> ops;
  ops.reserve(a.size() + b.size());
  for (size_t i = 0; i < pre; ++i) ops.push_back({' ', a[i]});
  std::vector<std::string_view> am(a.begin() + static_cast<long>(pre), a.end() - static_cast<long>(suf));
  std::vector<std::string_view> bm(b.begin() + static_cast<long>(pre), b.end() - static_cast<long>(suf));
  myers(am, bm, ops);
  for (size_t i = a.size() - suf; i < a.size(); ++i) ops.push_back({' ', a[i]});

  // Positions in a and b before each op, for hunk headers.
  std::vector<long> apos(ops.size() + 1), bpos(ops.size() + 1);
  for (size_t i = 0; i < ops.size(); ++i) {
    apos[i + 1] = apos[i] + (ops[i].kind != '+');
    bpos[i + 1] = bpos[i] + (ops[i].kind != '-');
  }
  std::vector<size_t> changes;
  for (size_t i = 0; i < ops.size(); ++i)
    if (ops[i].kind != ' ') changes.push_back(i);

  std::string out = fmt::format("--- a/{}\n+++ b/{}\n", path, path);
  const size_t ctx = static_cast<size_t>(context);
  size_t c = 0;
  while (c < changes.size()) {
    size_t first = changes[c], last = first;
    while (c + 1 < changes.size() && changes[c + 1] - last <= 2 * ctx + 1) last = changes[++c];
    ++c;
    size_t start = first > ctx ? first - ctx : 0;
    size_t end = std::min(ops.size(), last + ctx + 1);
    long acount = apos[end] - apos[start], bcount = bpos[end] - bpos[start];
    out += fmt::format("@@ -{} +{} @@\n", range(apos[start], acount), range(bpos[start], bcount));
    for (size_t i = start; i < end; ++i) emit_line(out, ops[i].kind, ops[i].line);
  }
  return out;
}

}  // namespace kiln::workspace
