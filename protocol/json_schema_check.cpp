// Start-up check of a schema against what the validator understands, so a schema using a keyword
// we would silently ignore (and so not enforce) stops the server instead of letting bad input in.
#include "protocol/json_schema.h"

#include <cstdint>
#include <regex>
#include <set>
#include <string_view>

#include "protocol/json_schema_detail.h"

namespace kiln::protocol {

using nlohmann::json;

namespace {

bool is_annotation(std::string_view k) {
  static const std::set<std::string_view> kAnnotations = {
      "$schema", "$id",      "$comment", "title",           "description",     "default",
      "examples", "format",  "readOnly", "writeOnly",       "deprecated",      "contentEncoding",
      "contentMediaType"};
  return kAnnotations.contains(k);
}

bool is_non_negative_integer(const json& v) {
  return (v.is_number_unsigned() || (v.is_number_integer() && v.get<std::int64_t>() >= 0));
}

class Checker {
 public:
  explicit Checker(const json& root) : root_(root) {}

  std::optional<std::string> schema(const json& s, const std::string& where) {
    if (s.is_boolean()) return std::nullopt;
    if (!s.is_object()) return "invalid schema at " + place(where) + ": must be an object or a boolean";
    for (const auto& [k, v] : s.items()) {
      if (is_annotation(k)) continue;
      if (auto problem = keyword(k, v, where)) return problem;
    }
    // apply_defaults hands a default to code that trusts validated input, so it must be valid.
    if (const auto d = s.find("default"); d != s.end()) {
      if (auto bad = schema_detail::validate_at(root_, s, *d)) {
        return "invalid 'default' at " + place(where) + ": the schema around it rejects it: " + to_string(*bad);
      }
    }
    return std::nullopt;
  }

 private:
  static std::string place(const std::string& where) { return where.empty() ? "the schema root" : where; }

  static std::string invalid(std::string_view k, const std::string& where, std::string_view why) {
    return "invalid '" + std::string(k) + "' at " + place(where) + ": " + std::string(why);
  }

  std::optional<std::string> subschemas_in_object(const json& v, std::string_view k, const std::string& where) {
    if (!v.is_object()) return invalid(k, where, "must be an object of schemas");
    for (const auto& [name, sub] : v.items()) {
      const std::string inner =
          where + "/" + std::string(k) + "/" + schema_detail::escape_pointer_segment(name);
      if (auto p = schema(sub, inner)) return p;
    }
    return std::nullopt;
  }

  std::optional<std::string> keyword(const std::string& k, const json& v, const std::string& where) {
    const std::string inner = where + "/" + k;
    if (k == "type") {
      static const std::set<std::string> kTypes = {"null",  "boolean", "object", "array",
                                                   "number", "string", "integer"};
      const bool ok_one = v.is_string() && kTypes.contains(v.get<std::string>());
      bool ok_list = v.is_array() && !v.empty();
      if (ok_list) {
        for (const auto& t : v) ok_list = ok_list && t.is_string() && kTypes.contains(t.get<std::string>());
      }
      if (!ok_one && !ok_list) return invalid(k, where, "must be a JSON type name or an array of them");
      return std::nullopt;
    }
    if (k == "properties" || k == "$defs" || k == "definitions") return subschemas_in_object(v, k, where);
    if (k == "additionalProperties" || k == "not") return schema(v, inner);
    if (k == "items") {
      if (v.is_array()) {
        return invalid(k, where, "the array (tuple) form is not supported; use a single schema");
      }
      return schema(v, inner);
    }
    if (k == "oneOf" || k == "anyOf" || k == "allOf") {
      if (!v.is_array() || v.empty()) return invalid(k, where, "must be a non-empty array of schemas");
      for (std::size_t i = 0; i < v.size(); ++i) {
        if (auto p = schema(v[i], inner + "/" + std::to_string(i))) return p;
      }
      return std::nullopt;
    }
    if (k == "required") {
      bool ok = v.is_array();
      if (ok) {
        for (const auto& r : v) ok = ok && r.is_string();
      }
      return ok ? std::nullopt : std::optional(invalid(k, where, "must be an array of strings"));
    }
    if (k == "enum") {
      return v.is_array() ? std::nullopt : std::optional(invalid(k, where, "must be an array"));
    }
    if (k == "const") return std::nullopt;
    if (k == "minimum" || k == "maximum" || k == "exclusiveMinimum" || k == "exclusiveMaximum") {
      return v.is_number() ? std::nullopt : std::optional(invalid(k, where, "must be a number"));
    }
    if (k == "multipleOf") {
      return v.is_number() && v.get<double>() > 0 ? std::nullopt
                                                  : std::optional(invalid(k, where, "must be a number > 0"));
    }
    if (k == "minLength" || k == "maxLength" || k == "minItems" || k == "maxItems" ||
        k == "minProperties" || k == "maxProperties") {
      return is_non_negative_integer(v) ? std::nullopt
                                        : std::optional(invalid(k, where, "must be a non-negative integer"));
    }
    if (k == "uniqueItems") {
      return v.is_boolean() ? std::nullopt : std::optional(invalid(k, where, "must be a boolean"));
    }
    if (k == "pattern") {
      if (!v.is_string()) return invalid(k, where, "must be a string");
      try {
        std::regex(v.get<std::string>(), std::regex::ECMAScript);
      } catch (const std::regex_error& e) {
        return invalid(k, where, "not a valid ECMAScript regular expression: " + std::string(e.what()));
      }
      return std::nullopt;
    }
    if (k == "$ref") {
      if (!v.is_string()) return invalid(k, where, "must be a string");
      if (!schema_detail::resolve_ref(root_, v.get<std::string>())) {
        return invalid(k, where, "'" + v.get<std::string>() + "' does not resolve (only local '#/...' references are supported)");
      }
      return std::nullopt;
    }
    return "unsupported keyword '" + k + "' at " + place(where);
  }

  const json& root_;
};

}  // namespace

std::optional<std::string> unsupported_keyword(const json& schema) {
  try {
    return Checker(schema).schema(schema, "");
  } catch (const std::exception& e) {
    return std::string("schema could not be checked: ") + e.what();
  }
}

}  // namespace kiln::protocol
