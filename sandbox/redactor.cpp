// Secret redaction for everything that leaves Kiln, including chunked output streams.
#include "sandbox/redactor.h"

#include <algorithm>

namespace kiln::sandbox {

Redactor::Redactor(const std::map<std::string, std::string>& secrets) {
  for (const auto& [name, value] : secrets) add(name, value);
}

void Redactor::add(const std::string& name, const std::string& value) {
  if (value.empty()) return;  // an empty value would match everywhere
  for (const auto& e : entries_)
    if (e.value == value) return;
  entries_.push_back({value, "[secret:" + name + "]"});
  std::stable_sort(entries_.begin(), entries_.end(),
                   [](const Entry& a, const Entry& b) { return a.value.size() > b.value.size(); });
  longest_ = std::max(longest_, value.size());
}

std::string Redactor::redact(std::string_view text) const {
  std::string out;
  redact_into(text, out, false);
  return out;
}

std::size_t Redactor::redact_into(std::string_view text, std::string& out, bool hold_partial) const {
  if (entries_.empty()) {
    out.append(text);
    return text.size();
  }
  out.reserve(out.size() + text.size());
  std::size_t i = 0;
  while (i < text.size()) {
    // Near the end, the rest may be the start of a value the next chunk completes: stop there.
    if (hold_partial && text.size() - i < longest_ && is_proper_prefix(text.substr(i))) return i;
    bool hit = false;
    for (const auto& e : entries_) {
      if (text.compare(i, e.value.size(), e.value) == 0) {
        out += e.replacement;
        i += e.value.size();
        hit = true;
        break;
      }
    }
    if (!hit) out += text[i++];
  }
  return i;
}

void Redactor::redact_json(nlohmann::json& j) const {
  if (entries_.empty()) return;
  if (j.is_string()) {
    j = redact(j.get_ref<const std::string&>());
  } else if (j.is_array()) {
    for (auto& v : j) redact_json(v);
  } else if (j.is_object()) {
    nlohmann::json copy = nlohmann::json::object();
    for (auto& [k, v] : j.items()) {
      redact_json(v);
      copy[redact(k)] = std::move(v);
    }
    j = std::move(copy);
  }
}

bool Redactor::is_proper_prefix(std::string_view text) const {
  for (const auto& e : entries_)
    if (text.size() < e.value.size() && std::string_view(e.value).substr(0, text.size()) == text) return true;
  return false;
}

std::string StreamRedactor::feed(std::string_view chunk) {
  if (!r_ || r_->empty()) return std::string(chunk);
  carry_.append(chunk);
  std::string out;
  std::size_t i = r_->redact_into(carry_, out, /*hold_partial=*/true);
  carry_.erase(0, i);
  return out;
}

std::string StreamRedactor::finish() {
  if (!r_) return std::exchange(carry_, {});
  std::string out = r_->redact(carry_);
  carry_.clear();
  return out;
}

}  // namespace kiln::sandbox
