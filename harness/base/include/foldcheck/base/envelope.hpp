#pragma once
// The envelope every command's JSON result opens with (reports/schema/foldcheck.schema.json,
// "header"): the tool, its version, the version of the schema and the command. Written in
// one place, so that a new field or a schema bump is one edit.
#include <nlohmann/json.hpp>

#include "foldcheck/base/version.hpp"

namespace foldcheck {

inline nlohmann::json result_envelope(const char* command) {
  return {{"tool", "foldcheck"}, {"version", kVersion}, {"schema_version", kSchemaVersion}, {"command", command}};
}

}  // namespace foldcheck
