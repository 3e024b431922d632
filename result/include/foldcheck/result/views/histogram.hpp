#pragma once
// A signed log2 histogram as a result stores it (numerics' histograms: a path's "ulp", "ppm"
// or "bound" view, an attribution stage's contribution, explain's residuals), restored once
// for the renderers (reports histogram_text).
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace foldcheck::result::views {

// One bucket: {"range", "negative", "positive", "upper"}. upper is absent or null for the
// last, unbounded bucket (or a bucket of an older file without it).
struct HistogramBucket {
  std::string range;
  std::int64_t negative = 0, positive = 0;
  std::optional<double> upper;
  static HistogramBucket from_json(const nlohmann::json& j);
};

// {"unit", "buckets", "zero"?, "unscored"?}. unit "bound" marks a histogram of ratios to each
// element's own bound. zero (exact elements) is optional: 0 when absent. unscored keeps, in
// the file's key order, only the integer counts (NaNs, infinities: elements with no finite
// error); a non-object "unscored" or a non-integer count is not one.
struct Histogram {
  std::string unit;
  std::int64_t zero = 0;
  std::vector<HistogramBucket> buckets;
  std::vector<std::pair<std::string, std::int64_t>> unscored;
  static Histogram from_json(const nlohmann::json& j);
};

}  // namespace foldcheck::result::views
