#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "foldcheck/reports/text.hpp"
#include "foldcheck/result/views/histogram.hpp"
#include "foldcheck/result/views/run.hpp"

namespace foldcheck::reports {

namespace {
std::string bar(std::int64_t count, std::int64_t max, int width, bool right) {
  if (count <= 0 || max <= 0) return std::string(static_cast<std::size_t>(width), ' ');
  // log-scaled length so that single outliers stay visible next to large buckets (clamped:
  // a hand-edited report may hold a count above its maximum)
  const double frac = std::min(1.0, std::log1p(static_cast<double>(count)) / std::log1p(static_cast<double>(max)));
  const int n = std::max(1, static_cast<int>(std::lround(frac * width)));
  std::string b;
  for (int i = 0; i < n; ++i) b += "█";
  const std::string pad(static_cast<std::size_t>(width - n), ' ');
  return right ? b + pad : pad + b;
}
}  // namespace

std::string histogram_text(const result::views::Histogram& h, int width) {
  std::int64_t maxc = h.zero;
  for (const auto& b : h.buckets) maxc = std::max({maxc, b.negative, b.positive});
  // A ratio histogram's unit is the element's own bound: a line marks where |ratio| passes 1.
  const bool ratio = h.unit == "bound";
  bool marked = !ratio;
  std::string s =
      fmt::format("  {:>18}  {:>9} {:>{}}│{:<{}} {:<9}\n", ratio ? "|error| / bound" : "|error| in " + h.unit,
                  "negative", "", width, "", width, "positive");
  if (h.zero > 0)
    s += fmt::format("  {:>18}  {:>9} {}│{} {:<9}\n", "0 (exact)", "", std::string(width, ' '),
                     bar(h.zero, maxc, width, true), h.zero);
  for (const auto& b : h.buckets) {
    if (!marked && (!b.upper || *b.upper > 1)) {
      s += fmt::format("  {:>18}  {}\n", "", "-- the bound (|ratio| = 1): rows below are beyond it --");
      marked = true;
    }
    s += fmt::format("  {:>18}  {:>9} {}│{} {:<9}\n", b.range, b.negative ? std::to_string(b.negative) : "",
                     bar(b.negative, maxc, width, false), bar(b.positive, maxc, width, true),
                     b.positive ? std::to_string(b.positive) : "");
  }
  if (!marked) s += fmt::format("  {:>18}  {}\n", "", "-- every element within its bound (|ratio| <= 1) --");
  s += fmt::format("  {:>18}  (bar length: log scale)\n", "");
  // Elements with no finite error (NaN, infinities) are listed, not dropped.
  std::string unscored;
  for (const auto& [k, v] : h.unscored)
    if (v > 0) unscored += fmt::format(" {}={}", k, v);
  if (!unscored.empty()) s += fmt::format("  {:>18}  not in the histogram:{}\n", "", unscored);
  return s;
}

std::string histogram_text(const nlohmann::json& h, int width) {
  return histogram_text(result::views::Histogram::from_json(h), width);
}

std::string seconds_suffix(std::optional<double> seconds) {
  return seconds ? fmt::format("  ({:.1f} s)", *seconds) : "";
}

std::string seconds_suffix(const nlohmann::json& r) { return seconds_suffix(result::views::timing_seconds(r)); }

}  // namespace foldcheck::reports
