#pragma once
// What the model commands' views (accuracy_diff, bisect, engines, quant_check) read alike.
#include <optional>

#include <nlohmann/json.hpp>

#include "foldcheck/result/views/json_io.hpp"

namespace foldcheck::result::views {

// The run's seconds ("timing": {"seconds"}); none when the block is absent (--no-timing).
inline std::optional<double> timing_seconds(const nlohmann::json& j) {
  auto t = j.find("timing");
  if (t == j.end() || !t->is_object()) return std::nullopt;
  return optional<double>(*t, "seconds");
}

// j[key] when it is a number; none when missing, null or anything else (a renderer's "-").
inline std::optional<double> number_or_none(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

}  // namespace foldcheck::result::views
