// The PCRE2 side of file_search: one JIT-compiled pattern shared by every worker, per-worker
// match state, and a line-oriented "next matching line" over a whole buffer, so a file without
// a match costs one JIT scan and no line counting.
#pragma once

#include <cstddef>
#include <memory>
#include <string_view>

#include "core/error.h"

namespace kiln::workspace {

class Matcher {
 public:
  struct Options {
    bool literal = false;
    bool case_sensitive = true;
  };

  // Errc::invalid_argument with PCRE2's message and offset for a bad regex.
  static Result<Matcher> compile(std::string_view pattern, Options options);

  // Per-thread match data (and JIT stack); create one per worker with scratch().
  class Scratch {
   public:
    Scratch(Scratch&&) noexcept;
    Scratch& operator=(Scratch&&) noexcept;
    ~Scratch();

   private:
    friend class Matcher;
    Scratch() = default;
    struct Impl;
    std::unique_ptr<Impl> impl_;
  };
  Scratch scratch() const;

  struct LineHit {
    size_t line_start;  // offset of the line's first byte
    size_t line_end;    // offset of its '\n' (or the end of the subject)
    size_t match_at;    // offset where the match starts, within [line_start, line_end]
  };

  // The first line at or after `from` (a line start) of subject[0, size) holding a match that
  // begins on it and ends before its newline (ripgrep's line-oriented semantics). Returns false
  // when there is none, or when PCRE2 gives up (match limit) on this subject.
  bool next_line(std::string_view subject, size_t from, Scratch& scratch, LineHit& hit) const;

  Matcher(Matcher&&) noexcept;
  Matcher& operator=(Matcher&&) noexcept;
  ~Matcher();

 private:
  Matcher() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::workspace
