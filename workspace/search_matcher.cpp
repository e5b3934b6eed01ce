// PCRE2 compile/JIT and the line-oriented scan. The whole buffer is matched at once; only when a
// match runs past its line's newline is the line searched again on its own.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "workspace/search_matcher.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>
#include <pcre2.h>

#include "workspace/search_text.h"

namespace kiln::workspace {

struct Matcher::Impl {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Impl() {
    if (code) pcre2_code_free(code);
  }
};

struct Matcher::Scratch::Impl {
  pcre2_match_data* md = nullptr;
  pcre2_match_context* mctx = nullptr;
  pcre2_jit_stack* stack = nullptr;
  ~Impl() {
    if (md) pcre2_match_data_free(md);
    if (mctx) pcre2_match_context_free(mctx);
    if (stack) pcre2_jit_stack_free(stack);
  }
};

Matcher::Scratch::Scratch(Scratch&&) noexcept = default;
Matcher::Scratch& Matcher::Scratch::operator=(Scratch&&) noexcept = default;
Matcher::Scratch::~Scratch() = default;
Matcher::Matcher(Matcher&&) noexcept = default;
Matcher& Matcher::operator=(Matcher&&) noexcept = default;
Matcher::~Matcher() = default;

Result<Matcher> Matcher::compile(std::string_view pattern, Options options) {
  uint32_t flags = 0;
  // PCRE2_LITERAL admits only a few companions; MULTILINE is meaningless for it anyway.
  flags |= options.literal ? PCRE2_LITERAL : PCRE2_MULTILINE;
  if (!options.case_sensitive) flags |= PCRE2_CASELESS;
  // UTF mode (code points, Unicode case folding) whenever the pattern allows it; files that are
  // not valid UTF-8 still match byte-wise where they are, thanks to MATCH_INVALID_UTF.
  if (valid_utf8(pattern)) flags |= PCRE2_UTF | PCRE2_MATCH_INVALID_UTF;
  int err = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), flags, &err,
                                   &offset, nullptr);
  if (!code) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    return fail(Errc::invalid_argument,
                fmt::format("invalid regular expression at offset {}: {} (patterns are PCRE2 regexes; pass "
                            "literal: true to search for the text exactly as written)",
                            offset, reinterpret_cast<const char*>(msg)));
  }
  Matcher m;
  m.impl_ = std::make_unique<Impl>();
  m.impl_->code = code;
  m.impl_->jit = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  return m;
}

Matcher::Scratch Matcher::scratch() const {
  Scratch s;
  s.impl_ = std::make_unique<Scratch::Impl>();
  s.impl_->md = pcre2_match_data_create_from_pattern(impl_->code, nullptr);
  s.impl_->mctx = pcre2_match_context_create(nullptr);
  if (impl_->jit) {
    s.impl_->stack = pcre2_jit_stack_create(32 * 1024, 1024 * 1024, nullptr);
    if (s.impl_->stack) pcre2_jit_stack_assign(s.impl_->mctx, nullptr, s.impl_->stack);
  }
  return s;
}

namespace {

int run(const pcre2_code* code, bool jit, pcre2_match_data* md, pcre2_match_context* mctx, const char* base,
        size_t len, size_t start) {
  auto subject = reinterpret_cast<PCRE2_SPTR>(base);
  if (jit) return pcre2_jit_match(code, subject, len, start, 0, md, mctx);
  return pcre2_match(code, subject, len, start, 0, md, mctx);
}

}  // namespace

bool Matcher::next_line(std::string_view subject, size_t from, Scratch& scratch, LineHit& hit) const {
  const char* base = subject.data();
  const size_t size = subject.size();
  auto& s = *scratch.impl_;
  size_t pos = from;
  while (pos < size) {
    int rc = run(impl_->code, impl_->jit, s.md, s.mctx, base, size, pos);
    if (rc < 0) return false;  // no match, or PCRE2 gave up (match/depth limit) on this buffer
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(s.md);
    size_t ms = std::min<size_t>(std::max<size_t>(ov[0], pos), size);  // \K can move the start
    size_t me = std::max<size_t>(ov[1], ms);
    const void* nl_before = ms > pos ? ::memrchr(base + pos, '\n', ms - pos) : nullptr;
    size_t ls = nl_before ? static_cast<const char*>(nl_before) - base + 1 : pos;
    if (ls >= size) return false;  // an empty match after the final newline is not a line
    const void* nl_after = std::memchr(base + ms, '\n', size - ms);
    size_t le = nl_after ? static_cast<const char*>(nl_after) - base : size;
    if (me <= le) {
      hit = {ls, le, ms};
      return true;
    }
    // The match ran across a newline: search this line alone (the subject ends at its newline).
    rc = run(impl_->code, impl_->jit, s.md, s.mctx, base, le, ls);
    if (rc >= 0) {
      ov = pcre2_get_ovector_pointer(s.md);
      hit = {ls, le, std::min<size_t>(std::max<size_t>(ov[0], ls), le)};
      return true;
    }
    if (rc != PCRE2_ERROR_NOMATCH) return false;
    pos = le + 1;
  }
  return false;
}

}  // namespace kiln::workspace
