// apply_defaults: the schema's `default`s filled into a validated instance, so the code reading
// the instance never restates them (and cannot drift from what tools/list advertises).
#include "protocol/json_schema.h"

#include "protocol/json_schema_detail.h"

namespace kiln::protocol {

using nlohmann::json;

namespace {

class Filler {
 public:
  explicit Filler(const json& root) : root_(root) {}

  void fill(const json& s, json& v) {
    // The instance is finite, but a $ref cycle (`"$ref": "#"`) revisits it without descending.
    if (!s.is_object() || depth_ >= kMaxDepth) return;
    ++depth_;
    // Chosen before anything at this level changes: the branch validation accepted.
    const json* branch = matching_branch(s, v);
    if (v.is_object()) fill_object(s, v);
    if (const auto items = s.find("items"); v.is_array() && items != s.end()) {
      for (auto& item : v) fill(*items, item);
    }
    if (const auto ref = s.find("$ref"); ref != s.end() && ref->is_string()) {
      if (const json* target = schema_detail::resolve_ref(root_, ref->get<std::string>())) fill(*target, v);
    }
    if (const auto all = s.find("allOf"); all != s.end() && all->is_array()) {
      for (const auto& b : *all) fill(b, v);
    }
    if (branch) fill(*branch, v);
    --depth_;
  }

 private:
  static constexpr int kMaxDepth = 200;

  // The first anyOf/oneOf branch the instance is valid against (for a valid instance and oneOf,
  // the only one); its defaults apply, the other branches' do not.
  const json* matching_branch(const json& s, const json& v) const {
    for (const char* key : {"oneOf", "anyOf"}) {
      const auto list = s.find(key);
      if (list == s.end() || !list->is_array()) continue;
      for (const auto& b : *list) {
        if (!schema_detail::validate_at(root_, b, v)) return &b;
      }
    }
    return nullptr;
  }

  void fill_object(const json& s, json& v) {
    const auto props = s.find("properties");
    const bool has_props = props != s.end() && props->is_object();
    if (has_props) {
      for (const auto& [name, sub] : props->items()) {
        if (!v.contains(name)) {
          if (!sub.is_object() || !sub.contains("default")) continue;
          v[name] = sub.at("default");
        }
        fill(sub, v[name]);
      }
    }
    if (const auto extra = s.find("additionalProperties"); extra != s.end() && extra->is_object()) {
      for (auto it = v.begin(); it != v.end(); ++it) {
        if (!has_props || !props->contains(it.key())) fill(*extra, it.value());
      }
    }
  }

  const json& root_;
  int depth_ = 0;
};

}  // namespace

void apply_defaults(const json& schema, json& instance) { Filler(schema).fill(schema, instance); }

}  // namespace kiln::protocol
