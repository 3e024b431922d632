#pragma once
// What the model commands' views (accuracy_diff, bisect, engines, quant_check) read alike.
#include <optional>

#include <nlohmann/json.hpp>

#include "foldcheck/result/views/json_io.hpp"
#include "foldcheck/result/views/run.hpp"

namespace foldcheck::result::views {

// The run's seconds: views/run.hpp's timing_seconds (one definition for every view).

// j[key] when it is a number; none when missing, null or anything else (a renderer's "-").
inline std::optional<double> number_or_none(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

}  // namespace foldcheck::result::views
