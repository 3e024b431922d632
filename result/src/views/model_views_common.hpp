#pragma once
// What the model commands' views (accuracy_diff, bisect, engines, quant_check) read alike.
#include <optional>

#include <nlohmann/json.hpp>

#include "foldcheck/result/views/json_io.hpp"
#include "foldcheck/result/views/run.hpp"

namespace foldcheck::result::views {

// The run's seconds: views/run.hpp's timing_seconds (one definition for every view).

// j[key] as a number; none when missing or null (a renderer's "-"); a value of another type is
// a malformed result and throws (json_io.hpp).
inline std::optional<double> number_or_none(const nlohmann::json& j, const char* key) {
  return optional<double>(j, key);
}

}  // namespace foldcheck::result::views
