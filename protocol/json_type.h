// The JSON type vocabulary of error messages, shared so every "expected X, got Y" in the protocol
// layer names types the same way (JSON Schema's names: "integer" for integral numbers).
#pragma once

#include <cmath>
#include <string_view>

#include <nlohmann/json.hpp>

namespace kiln::protocol {

// True for integer-typed values and for floats with no fractional part (JSON Schema: 3.0 is an
// integer).
inline bool is_integral(const nlohmann::json& v) {
  if (v.is_number_integer()) return true;
  if (!v.is_number_float()) return false;
  const double d = v.get<double>();
  return std::isfinite(d) && std::trunc(d) == d;
}

inline std::string_view json_type_name(const nlohmann::json& v) {
  switch (v.type()) {
    case nlohmann::json::value_t::null: return "null";
    case nlohmann::json::value_t::boolean: return "boolean";
    case nlohmann::json::value_t::object: return "object";
    case nlohmann::json::value_t::array: return "array";
    case nlohmann::json::value_t::string: return "string";
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned: return "integer";
    case nlohmann::json::value_t::number_float: return "number";
    case nlohmann::json::value_t::binary: return "binary";
    case nlohmann::json::value_t::discarded: return "invalid";
  }
  return "invalid";
}

}  // namespace kiln::protocol
