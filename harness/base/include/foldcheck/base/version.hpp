#pragma once
namespace foldcheck {
inline constexpr const char* kVersion = "0.1.0";
// The version of the JSON every command writes (reports/schema/foldcheck.schema.json):
// raised when a field is removed, renamed or changes meaning; new fields keep it.
inline constexpr int kSchemaVersion = 1;
}
