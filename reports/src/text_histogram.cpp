#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "foldcheck/reports/text.hpp"

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

std::string histogram_text(const nlohmann::json& h, int width) {
  std::int64_t maxc = h.value("zero", std::int64_t{0});
  for (const auto& b : h["buckets"]) maxc = std::max({maxc, b["negative"].get<std::int64_t>(), b["positive"].get<std::int64_t>()});
  const std::string unit = h["unit"];
  // A ratio histogram's unit is the element's own bound: a line marks where |ratio| passes 1.
  const bool ratio = unit == "bound";
  bool marked = !ratio;
  std::string s = fmt::format("  {:>18}  {:>9} {:>{}}│{:<{}} {:<9}\n", ratio ? "|error| / bound" : "|error| in " + unit,
                              "negative", "", width, "", width, "positive");
  if (h.value("zero", 0) > 0)
    s += fmt::format("  {:>18}  {:>9} {}│{} {:<9}\n", "0 (exact)", "", std::string(width, ' '),
                     bar(h["zero"], maxc, width, true), h["zero"].get<std::int64_t>());
  for (const auto& b : h["buckets"]) {
    const auto n = b["negative"].get<std::int64_t>(), p = b["positive"].get<std::int64_t>();
    if (!marked && (!b["upper"].is_number() || b["upper"].get<double>() > 1)) {
      s += fmt::format("  {:>18}  {}\n", "", "-- the bound (|ratio| = 1): rows below are beyond it --");
      marked = true;
    }
    s += fmt::format("  {:>18}  {:>9} {}│{} {:<9}\n", b["range"].get<std::string>(), n ? std::to_string(n) : "",
                     bar(n, maxc, width, false), bar(p, maxc, width, true), p ? std::to_string(p) : "");
  }
  if (!marked) s += fmt::format("  {:>18}  {}\n", "", "-- every element within its bound (|ratio| <= 1) --");
  s += fmt::format("  {:>18}  (bar length: log scale)\n", "");
  // Elements with no finite error (NaN, infinities) are listed, not dropped.
  std::string unscored;
  if (h.contains("unscored") && h["unscored"].is_object())
    for (const auto& [k, v] : h["unscored"].items())
      if (v.is_number_integer() && v.get<std::int64_t>() > 0) unscored += fmt::format(" {}={}", k, v.get<std::int64_t>());
  if (!unscored.empty()) s += fmt::format("  {:>18}  not in the histogram:{}\n", "", unscored);
  return s;
}

std::string seconds_suffix(const nlohmann::json& r) {
  if (!r.contains("timing") || !r["timing"].contains("seconds")) return "";
  return fmt::format("  ({:.1f} s)", r["timing"]["seconds"].get<double>());
}

}  // namespace foldcheck::reports
