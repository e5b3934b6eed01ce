// The validator: one recursive walk over schema and instance that stops at the first violation and
// words it for an agent. Alternatives (oneOf/anyOf) pick the branch the instance plausibly meant.
#include "protocol/json_schema.h"

#include "core/quote.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <regex>
#include <tuple>
#include <vector>

#include "protocol/json_schema_detail.h"
#include "protocol/json_type.h"

namespace kiln::protocol {

using nlohmann::json;

namespace schema_detail {

const json* resolve_ref(const json& root, std::string_view ref) {
  if (!ref.starts_with('#')) return nullptr;
  try {
    const json::json_pointer ptr{std::string(ref.substr(1))};
    if (!root.contains(ptr)) return nullptr;
    return &root.at(ptr);
  } catch (const json::exception&) {
    return nullptr;
  }
}

std::string escape_pointer_segment(std::string_view segment) {
  std::string out;
  for (char c : segment) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace schema_detail

namespace {

// Type and value-set failures say "this is the wrong kind of thing", which is what tells
// alternatives apart; `other` failures (missing property, too short, ...) are about a right kind.
enum class Kind { type, value_set, other };

struct Failure {
  std::vector<std::string> segments;  // instance path, already pointer-escaped
  std::string message;
  Kind kind = Kind::other;
  std::vector<std::string> expected;  // type names or rendered values, for merging alternatives
  std::vector<std::string> quoted;    // value_set only: the values as JSON, for mixed merges
};

std::string join(const std::vector<std::string>& items, std::string_view sep) {
  std::string out;
  for (const auto& s : items) {
    if (!out.empty()) out += sep;
    out += s;
  }
  return out;
}

// Strings bare (reads naturally in "must be one of: text, base64"), everything else as JSON.
std::string render(const json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

std::string truncated_dump(const json& v) {
  std::string s = v.dump(-1, ' ', false, json::error_handler_t::replace);
  if (s.size() > 120) s = s.substr(0, 117) + "...";
  return s;
}

std::size_t code_points(const std::string& s) {
  return static_cast<std::size_t>(
      std::ranges::count_if(s, [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

bool type_matches(std::string_view type, const json& v) {
  if (type == "integer") return is_integral(v);
  if (type == "number") return v.is_number();
  if (type == "string") return v.is_string();
  if (type == "object") return v.is_object();
  if (type == "array") return v.is_array();
  if (type == "boolean") return v.is_boolean();
  if (type == "null") return v.is_null();
  return false;
}

std::vector<std::string> type_list(const json& t) {
  std::vector<std::string> out;
  if (t.is_string()) out.push_back(t.get<std::string>());
  if (t.is_array()) {
    for (const auto& e : t) {
      if (e.is_string()) out.push_back(e.get<std::string>());
    }
  }
  return out;
}

std::string type_message(const std::vector<std::string>& expected, const json& v) {
  return "expected " + join(expected, " or ") + ", got " + std::string(json_type_name(v));
}

std::string value_set_message(const std::vector<std::string>& values) {
  return values.size() == 1 ? "must be " + values.front() : "must be one of: " + join(values, ", ");
}

class Validator {
 public:
  explicit Validator(const json& root) : root_(root) {}

  std::optional<Failure> check(const json& s, const json& v) {
    if (depth_ >= kMaxDepth) return fail("schema nesting too deep (recursive $ref?)");
    ++depth_;
    auto result = check_inner(s, v);
    --depth_;
    return result;
  }

 private:
  static constexpr int kMaxDepth = 200;

  std::optional<Failure> fail(std::string message, Kind kind = Kind::other,
                              std::vector<std::string> expected = {},
                              std::vector<std::string> quoted = {}) const {
    return Failure{path_, std::move(message), kind, std::move(expected), std::move(quoted)};
  }

  std::optional<Failure> check_inner(const json& s, const json& v) {
    if (s.is_boolean()) {
      return s.get<bool>() ? std::nullopt : fail("no value is allowed here");
    }
    if (!s.is_object()) return std::nullopt;

    if (const auto ref = s.find("$ref"); ref != s.end() && ref->is_string()) {
      const json* target = schema_detail::resolve_ref(root_, ref->get<std::string>());
      if (!target) return fail("schema error: $ref '" + ref->get<std::string>() + "' does not resolve");
      if (auto f = check(*target, v)) return f;
    }
    if (auto f = check_type_and_values(s, v)) return f;
    if (v.is_string()) {
      if (auto f = check_string(s, v.get_ref<const std::string&>())) return f;
    }
    if (v.is_number()) {
      if (auto f = check_number(s, v)) return f;
    }
    if (v.is_array()) {
      if (auto f = check_array(s, v)) return f;
    }
    if (v.is_object()) {
      if (auto f = check_object(s, v)) return f;
    }
    return check_combinators(s, v);
  }

  std::optional<Failure> check_type_and_values(const json& s, const json& v) {
    if (const auto t = s.find("type"); t != s.end()) {
      const auto types = type_list(*t);
      if (std::ranges::none_of(types, [&](const std::string& n) { return type_matches(n, v); })) {
        return fail(type_message(types, v), Kind::type, types);
      }
    }
    if (const auto c = s.find("const"); c != s.end() && v != *c) {
      return fail("must be " + truncated_dump(*c), Kind::value_set, {render(*c)}, {truncated_dump(*c)});
    }
    if (const auto e = s.find("enum"); e != s.end() && e->is_array()) {
      if (std::ranges::find(*e, v) == e->end()) {
        std::vector<std::string> values;
        std::vector<std::string> quoted;
        for (const auto& x : *e) {
          values.push_back(render(x));
          quoted.push_back(truncated_dump(x));
        }
        std::string message = value_set_message(values);
        return fail(std::move(message), Kind::value_set, std::move(values), std::move(quoted));
      }
    }
    return std::nullopt;
  }

  std::optional<Failure> check_string(const json& s, const std::string& v) {
    const auto len = s.find("minLength") != s.end() || s.find("maxLength") != s.end() ? code_points(v) : 0;
    if (const auto m = s.find("minLength"); m != s.end() && m->is_number() && json(len) < *m) {
      return fail("must be at least " + m->dump() + " character" + (*m == 1 ? "" : "s") +
                  " long, got " + std::to_string(len));
    }
    if (const auto m = s.find("maxLength"); m != s.end() && m->is_number() && json(len) > *m) {
      return fail("must be at most " + m->dump() + " characters long, got " + std::to_string(len));
    }
    if (const auto p = s.find("pattern"); p != s.end() && p->is_string()) {
      const std::string& source = p->get_ref<const std::string&>();
      auto it = regex_cache_.find(source);
      if (it == regex_cache_.end()) {
        try {
          it = regex_cache_.emplace(source, std::regex(source, std::regex::ECMAScript)).first;
        } catch (const std::regex_error&) {
          return fail("schema error: invalid pattern " + source);
        }
      }
      if (!std::regex_search(v, it->second)) return fail("must match the pattern " + source);
    }
    return std::nullopt;
  }

  std::optional<Failure> check_number(const json& s, const json& v) {
    struct Bound {
      const char* keyword;
      const char* op;
      bool (*ok)(const json&, const json&);
    };
    static constexpr Bound kBounds[] = {
        {"minimum", ">=", [](const json& x, const json& b) { return !(x < b); }},
        {"exclusiveMinimum", ">", [](const json& x, const json& b) { return b < x; }},
        {"maximum", "<=", [](const json& x, const json& b) { return !(b < x); }},
        {"exclusiveMaximum", "<", [](const json& x, const json& b) { return x < b; }},
    };
    for (const auto& b : kBounds) {
      const auto bound = s.find(b.keyword);
      if (bound != s.end() && bound->is_number() && !b.ok(v, *bound)) {
        return fail(std::string("must be ") + b.op + " " + bound->dump() + ", got " + v.dump());
      }
    }
    if (const auto m = s.find("multipleOf"); m != s.end() && m->is_number()) {
      const double q = v.get<double>() / m->get<double>();
      if (!std::isfinite(q) || std::abs(q - std::round(q)) > 1e-9) {
        return fail("must be a multiple of " + m->dump() + ", got " + v.dump());
      }
    }
    return std::nullopt;
  }

  std::optional<Failure> check_array(const json& s, const json& v) {
    if (const auto m = s.find("minItems"); m != s.end() && m->is_number() && json(v.size()) < *m) {
      return fail("must have at least " + m->dump() + " item" + (*m == 1 ? "" : "s") + ", got " +
                  std::to_string(v.size()));
    }
    if (const auto m = s.find("maxItems"); m != s.end() && m->is_number() && json(v.size()) > *m) {
      return fail("must have at most " + m->dump() + " items, got " + std::to_string(v.size()));
    }
    if (const auto u = s.find("uniqueItems"); u != s.end() && *u == true) {
      for (std::size_t i = 1; i < v.size(); ++i) {
        for (std::size_t j = 0; j < i; ++j) {
          if (v[i] == v[j]) {
            return at(std::to_string(i), [&] {
              return fail("duplicates item " + std::to_string(j) + "; items must be unique");
            });
          }
        }
      }
    }
    if (const auto items = s.find("items"); items != s.end() && (items->is_object() || items->is_boolean())) {
      for (std::size_t i = 0; i < v.size(); ++i) {
        if (auto f = at(std::to_string(i), [&] { return check(*items, v[i]); })) return f;
      }
    }
    return std::nullopt;
  }

  std::optional<Failure> check_object(const json& s, const json& v) {
    if (const auto req = s.find("required"); req != s.end() && req->is_array()) {
      for (const auto& name : *req) {
        if (name.is_string() && !v.contains(name.get<std::string>())) {
          return fail("missing required property '" + name.get<std::string>() + "'");
        }
      }
    }
    if (const auto m = s.find("minProperties"); m != s.end() && m->is_number() && json(v.size()) < *m) {
      return fail("must have at least " + m->dump() + " propert" + (*m == 1 ? "y" : "ies") + ", got " +
                  std::to_string(v.size()));
    }
    if (const auto m = s.find("maxProperties"); m != s.end() && m->is_number() && json(v.size()) > *m) {
      return fail("must have at most " + m->dump() + " properties, got " + std::to_string(v.size()));
    }
    const auto props = s.find("properties");
    const bool has_props = props != s.end() && props->is_object();
    const auto extra = s.find("additionalProperties");
    // Unexpected names first: a misspelt property is the root cause of most other complaints.
    if (extra != s.end() && *extra == false) {
      for (const auto& [name, _] : v.items()) {
        if (!has_props || !props->contains(name)) {
          std::vector<std::string> allowed;
          if (has_props) {
            for (const auto& [p, _2] : props->items()) allowed.push_back(p);
          }
          return fail("unexpected property '" + bounded(name) + "' (allowed: " +
                      (allowed.empty() ? std::string("none") : join(allowed, ", ")) + ")");
        }
      }
    }
    for (const auto& [name, value] : v.items()) {
      const json* sub = nullptr;
      if (has_props && props->contains(name)) {
        sub = &props->at(name);
      } else if (extra != s.end() && extra->is_object()) {
        sub = &*extra;
      }
      if (sub) {
        if (auto f = at(name, [&] { return check(*sub, value); })) return f;
      }
    }
    return std::nullopt;
  }

  std::optional<Failure> check_combinators(const json& s, const json& v) {
    if (const auto all = s.find("allOf"); all != s.end() && all->is_array()) {
      for (const auto& branch : *all) {
        if (auto f = check(branch, v)) return f;
      }
    }
    if (const auto any = s.find("anyOf"); any != s.end() && any->is_array()) {
      std::vector<Failure> failures;
      for (const auto& branch : *any) {
        auto f = check(branch, v);
        if (!f) {
          failures.clear();
          break;
        }
        failures.push_back(std::move(*f));
      }
      if (!failures.empty()) return best_of(*any, v, std::move(failures));
    }
    if (const auto one = s.find("oneOf"); one != s.end() && one->is_array()) {
      std::vector<Failure> failures;
      std::vector<std::string> matched;
      for (std::size_t i = 0; i < one->size(); ++i) {
        if (auto f = check((*one)[i], v)) {
          failures.push_back(std::move(*f));
        } else {
          matched.push_back(std::to_string(i));
        }
      }
      if (matched.size() > 1) {
        return fail("matches more than one alternative (oneOf branches " + join(matched, ", ") +
                    "); it must match exactly one");
      }
      if (matched.empty() && !failures.empty()) return best_of(*one, v, std::move(failures));
    }
    if (const auto n = s.find("not"); n != s.end()) {
      if (!check(*n, v)) return fail("must not match the schema " + truncated_dump(*n));
    }
    return std::nullopt;
  }

  const json* deref(const json& s) const {
    const json* b = &s;
    for (int hops = 0; b->is_object() && b->contains("$ref") && (*b)["$ref"].is_string(); ++hops) {
      if (hops == 16) return nullptr;
      b = schema_detail::resolve_ref(root_, (*b)["$ref"].get<std::string>());
      if (!b) return nullptr;
    }
    return b;
  }

  static bool kind_fits(const json& s, const json& v) {
    if (s.is_boolean()) return s.get<bool>();
    if (!s.is_object()) return true;
    if (const auto t = s.find("type"); t != s.end()) {
      if (std::ranges::none_of(type_list(*t), [&](const std::string& n) { return type_matches(n, v); })) {
        return false;
      }
    }
    if (const auto c = s.find("const"); c != s.end() && v != *c) return false;
    const auto e = s.find("enum");
    return e == s.end() || !e->is_array() || std::ranges::find(*e, v) != e->end();
  }

  // Whether the instance is the kind of thing a branch describes: type, const and enum fit at the
  // top and on the properties it has (the discriminator of a tagged union).
  bool plausible(const json& branch, const json& v) const {
    const json* b = deref(branch);
    if (!b || !kind_fits(*b, v)) return false;
    if (!v.is_object() || !b->is_object()) return true;
    const auto props = b->find("properties");
    if (props == b->end() || !props->is_object()) return true;
    for (const auto& [name, sub] : props->items()) {
      if (!v.contains(name)) continue;
      const json* target = deref(sub);
      if (target && !kind_fits(*target, v.at(name))) return false;
    }
    return true;
  }

  std::optional<Failure> best_of(const json& branches, const json& v, std::vector<Failure> failures) {
    std::vector<bool> fits;
    for (const auto& b : branches) fits.push_back(plausible(b, v));
    const bool any_fits = std::ranges::find(fits, true) != fits.end();
    if (!any_fits) {
      // Every branch rejected the instance's kind right here: one combined message says it all.
      const bool all_here = std::ranges::all_of(failures, [&](const Failure& f) {
        return f.segments == path_ && f.kind != Kind::other;
      });
      const bool all_types = std::ranges::all_of(failures, [](const Failure& f) { return f.kind == Kind::type; });
      const bool all_values = std::ranges::all_of(failures, [](const Failure& f) { return f.kind == Kind::value_set; });
      if (all_here) {
        std::vector<std::string> expected;
        std::vector<std::string> quoted;
        auto add = [](std::vector<std::string>& to, const std::vector<std::string>& items) {
          for (const auto& e : items) {
            if (std::ranges::find(to, e) == to.end()) to.push_back(e);
          }
        };
        for (const auto& f : failures) {
          add(expected, all_values || f.kind == Kind::type ? f.expected : f.quoted);
          add(quoted, f.quoted);
        }
        if (all_values) return fail(value_set_message(expected), Kind::value_set, expected, quoted);
        // Types, possibly mixed with literal values: "expected integer or \"none\", got string".
        return fail(type_message(expected, v), all_types ? Kind::type : Kind::other, expected);
      }
    }
    // Otherwise the failure of a plausible branch, preferring one that got deeper into the value.
    std::size_t best = 0;
    auto score = [&](std::size_t i) {
      return std::tuple(fits[i] ? 1 : 0, failures[i].segments.size(), failures[i].kind == Kind::other ? 1 : 0);
    };
    for (std::size_t i = 1; i < failures.size(); ++i) {
      if (score(i) > score(best)) best = i;
    }
    return std::move(failures[best]);
  }

  template <class F>
  std::optional<Failure> at(const std::string& segment, F&& body) {
    path_.push_back(schema_detail::escape_pointer_segment(segment));
    auto r = body();
    path_.pop_back();
    return r;
  }

  const json& root_;
  std::vector<std::string> path_;
  int depth_ = 0;
  std::map<std::string, std::regex> regex_cache_;
};

}  // namespace

std::optional<SchemaViolation> schema_detail::validate_at(const json& root, const json& schema, const json& instance) {
  try {
    Validator validator(root);
    auto f = validator.check(schema, instance);
    if (!f) return std::nullopt;
    std::string path;
    for (const auto& s : f->segments) path += "/" + s;
    return SchemaViolation{std::move(path), std::move(f->message)};
  } catch (const std::exception& e) {
    // std::regex can give up on pathological input (error_complexity / error_stack).
    return SchemaViolation{"", std::string("could not validate: ") + e.what()};
  }
}

std::optional<SchemaViolation> validate(const json& schema, const json& instance) {
  return schema_detail::validate_at(schema, schema, instance);
}

std::string to_string(const SchemaViolation& v) {
  return v.path.empty() ? v.message : "at " + v.path + ": " + v.message;
}

}  // namespace kiln::protocol
