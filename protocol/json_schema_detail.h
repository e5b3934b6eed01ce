// Pieces the validator and the start-up schema check must agree on; not part of the public API.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "protocol/json_schema.h"

namespace kiln::protocol::schema_detail {

// Local references only ("#", "#/$defs/X", any "#/json/pointer"); nullptr when it does not resolve.
const nlohmann::json* resolve_ref(const nlohmann::json& root, std::string_view ref);

// validate() for a part of a schema: `schema` lies inside `root`, where its $refs resolve.
std::optional<SchemaViolation> validate_at(const nlohmann::json& root, const nlohmann::json& schema,
                                           const nlohmann::json& instance);

// "/a~1b/0" style escaping of one path segment.
std::string escape_pointer_segment(std::string_view segment);

}  // namespace kiln::protocol::schema_detail
