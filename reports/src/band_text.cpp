// The text of a model's calibrated band (band_text.hpp).
#include "band_text.hpp"

#include <fmt/format.h>

namespace foldcheck::reports {

namespace v = result::views;

namespace {
// A figure: "inf" when the view holds none (not finite), as accuracy_diff_text.cpp prints it.
std::string num(const v::Figure& x) { return x ? fmt::format("{:.3g}", *x) : std::string("inf"); }
}  // namespace

std::string output_band_text(const v::AdiffBand& b, const std::string& indent) {
  if (b.not_computed) return indent + "band: not computed — " + *b.not_computed + "\n";
  const auto row = [&](const v::AdiffBandDirection& d) {
    return fmt::format("{}  {} {}: {}x its band, a change of about {} ppm (the band sees {} ppm there)\n", indent,
                       d.layer, d.direction, num(d.ratio), num(d.change_ppm), num(d.floor_ppm));
  };
  std::string s = fmt::format(
      "{}band ({} directions: each layer's channels and BatchNorm eps, against {} honest float32 runs; false alarm "
      "{:g} over all): {} beyond; a one-channel change is seen from {} ppm (median over channels; 90% from {} ppm)\n",
      indent, b.directions, b.samples, b.alpha, b.beyond_count, num(b.floor_median_ppm), num(b.floor_p90_ppm));
  if (b.scale_drift_ppm != 0)
    s += fmt::format(
        "{}  a drift of every BatchNorm's scale in common, fitted at {:.2g} ppm, taken out first (within what a "
        "hardware rsqrt estimate refined by one Newton step gives, 0 to -0.2 ppm: TensorFlow's BatchNorm, TFLite's "
        "fold)\n",
        indent, b.scale_drift_ppm);
  for (const v::AdiffBandDirection& d : b.beyond) s += row(d);
  if (b.beyond_count > static_cast<std::int64_t>(b.beyond.size()))
    s += fmt::format("{}  ... and {} more (a change along one direction projects on its neighbours)\n", indent,
                     b.beyond_count - static_cast<std::int64_t>(b.beyond.size()));
  if (b.beyond.empty() && b.worst) s += indent + "closest:\n" + row(*b.worst);
  return s;
}

}  // namespace foldcheck::reports
