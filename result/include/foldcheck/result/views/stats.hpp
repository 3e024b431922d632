#pragma once
// Percentiles of a distribution as a summary keeps them (views/summary.hpp), and as the views
// of the results it condenses restore them (views/run.hpp, accuracy_diff.hpp).
#include <cstdint>
#include <optional>

#include <nlohmann/json.hpp>

namespace foldcheck::result::views {

// Percentiles of a distribution of |ULP| or |ppm| (compare.hpp's Distribution, absolute where
// signed). {"p50", "p99", "p99_9", "max_abs", "rms", "count"}: every key written, each null
// when the distribution had none (nothing compared, or a NaN).
struct Stats {
  std::optional<double> p50, p99, p99_9, max_abs, rms;
  std::optional<std::int64_t> count;
  bool operator==(const Stats&) const = default;
  static Stats from_json(const nlohmann::json& j);
  nlohmann::json to_json() const;
};

}  // namespace foldcheck::result::views
