// Restoring a stored histogram (views/histogram.hpp).
#include "foldcheck/result/views/histogram.hpp"

#include "foldcheck/result/views/json_io.hpp"

namespace foldcheck::result::views {

using json = nlohmann::json;

HistogramBucket HistogramBucket::from_json(const json& j) {
  HistogramBucket b;
  b.range = required<std::string>(j, "range");
  b.negative = required_count(j, "negative");
  b.positive = required_count(j, "positive");
  if (const std::optional<double> upper = optional<double>(j, "upper")) b.upper = *upper;
  return b;
}

Histogram Histogram::from_json(const json& j) {
  Histogram h;
  h.unit = required<std::string>(j, "unit");
  h.zero = optional_count(j, "zero").value_or(0);
  for (const json& b : j.at("buckets")) h.buckets.push_back(HistogramBucket::from_json(b));
  if (auto it = j.find("unscored"); it != j.end() && !it->is_null())
    for (const auto& [k, v] : it->get_ref<const json::object_t&>()) h.unscored.emplace_back(k, count_as(v, k));
  return h;
}

}  // namespace foldcheck::result::views
