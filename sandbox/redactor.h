// Keeps secret values from leaving Kiln: every text that goes out (results, progress, spooled
// output, errors) passes through here and each value becomes [secret:NAME].
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace kiln::sandbox {

class Redactor {
 public:
  Redactor() = default;
  explicit Redactor(const std::map<std::string, std::string>& secrets);  // name -> value

  void add(const std::string& name, const std::string& value);
  bool empty() const { return entries_.empty(); }
  // Length of the longest value, so a stream redactor knows how much to hold back.
  std::size_t longest() const { return longest_; }

  std::string redact(std::string_view text) const;
  // Appends the redaction of `text` to `out`; with hold_partial, stops before a trailing part
  // that could still become a value and returns how many bytes of `text` were consumed.
  std::size_t redact_into(std::string_view text, std::string& out, bool hold_partial) const;
  // Redacts every string (and every object key) inside `j`.
  void redact_json(nlohmann::json& j) const;

  // Whether `text` is a proper prefix of some value: such bytes at the end of a chunk must wait
  // for the next chunk before they can be released.
  bool is_proper_prefix(std::string_view text) const;

 private:
  struct Entry {
    std::string value;
    std::string replacement;
  };
  std::vector<Entry> entries_;  // longest value first, so overlapping values redact fully
  std::size_t longest_ = 0;
};

// Redacts a byte stream that arrives in chunks, so a value split across two chunks is still
// caught: it releases all but the few trailing bytes that might begin a secret, and hands those
// over with the next chunk (or at finish()).
class StreamRedactor {
 public:
  explicit StreamRedactor(std::shared_ptr<const Redactor> r) : r_(std::move(r)) {}
  // No value to hide: feed would return each chunk unchanged, so a caller may skip it.
  bool passthrough() const { return !r_ || r_->empty(); }
  std::string feed(std::string_view chunk);
  std::string finish();

 private:
  std::shared_ptr<const Redactor> r_;
  std::string carry_;
};

}  // namespace kiln::sandbox
