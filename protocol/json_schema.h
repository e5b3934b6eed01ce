// Validation of tool arguments against the JSON Schema 2020-12 subset Kiln's schemas use, with
// messages written so an agent can fix its call from the message alone.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace kiln::protocol {

struct SchemaViolation {
  std::string path;     // JSON Pointer into the instance: "" is the root, "/edits/0/old_text"
  std::string message;  // e.g. "missing required property 'path'", "expected integer, got string"
};

// The first violation found, or nullopt when the instance is valid. For oneOf/anyOf the message of
// the branch the instance most plausibly meant is reported. Never throws; keywords outside the
// subset are ignored here (check them once at start-up with unsupported_keyword).
//
// Subset: type, properties, required, additionalProperties, items, enum, const, minimum, maximum,
// exclusiveMinimum, exclusiveMaximum, multipleOf, minLength, maxLength (code points), pattern
// (ECMAScript, unanchored), minItems, maxItems, uniqueItems, minProperties, maxProperties, oneOf,
// anyOf, allOf, not, local $ref ("#", "#/$defs/X", "#/definitions/X", any "#/pointer"), boolean
// schemas; annotations ($schema, $id, title, description, default, examples, format, ...) ignored.
std::optional<SchemaViolation> validate(const nlohmann::json& schema, const nlohmann::json& instance);

// Completes an instance `validate` accepted: every property the schema declares with a `default`
// and the instance lacks gets a copy of that default, wherever the instance reaches (nested objects,
// including a default just filled in; objects inside arrays through `items`; additionalProperties;
// $ref; allOf; the oneOf/anyOf branch the instance matches). Present values are never changed,
// arrays never gain or lose items, and a property without a default stays absent. So a tool handler
// reads one set of defaults, the schema's, which tools/list shows. unsupported_keyword has checked
// that each default is valid where it stands.
void apply_defaults(const nlohmann::json& schema, nlohmann::json& instance);

// Why the schema cannot be trusted to validate as written, or nullopt: the first keyword outside
// the subset, or a keyword with an unusable value, anywhere in the schema. The text names the
// keyword and its location, e.g. "unsupported keyword 'patternProperties' at /properties/env" or
// "invalid 'minLength' at /properties/path: must be a non-negative integer". A `default` the schema
// around it rejects is such a problem too, since apply_defaults would hand it to a handler.
std::optional<std::string> unsupported_keyword(const nlohmann::json& schema);

// "at /edits/0: missing required property 'old_text'" (just the message for the root).
std::string to_string(const SchemaViolation& violation);

}  // namespace kiln::protocol
