// The JSON of a model's calibrated band (output_band_json.hpp).
#include "output_band_json.hpp"

#include <cmath>

#include <fmt/format.h>

#include "foldcheck/result/judgement.hpp"

namespace foldcheck {

using json = nlohmann::json;

namespace {

// A number, or null when not finite.
json figure(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

json band_direction_json(const BandDirection& d) {
  return {{"layer", d.layer},
          {"direction", d.channel >= 0 ? fmt::format("channel {}", d.channel) : std::string("eps")},
          {"channel", d.channel >= 0 ? json(d.channel) : json(nullptr)},
          {"ratio_to_band", figure(d.ratio)},
          {"change_ppm", figure(d.rho * 1e6)},
          {"floor_ppm", figure(d.floor * 1e6)}};
}

}  // namespace

json output_band_json(const OutputBand& b) {
  if (b.not_computed) return {{"computed", false}, {"not_computed", *b.not_computed}};
  json beyond = json::array();
  for (const BandDirection& d : b.beyond) beyond.push_back(band_direction_json(d));
  return {{"computed", true},
          {"samples", b.samples},
          {"probes", b.probes},
          {"directions", b.directions},
          {"alpha", b.alpha},
          {"alpha_per_direction", b.alpha_direction},
          {"t_quantile", b.quantile},
          {"degrees_of_freedom", {{"min", b.dof_min}, {"max", b.dof_max}}},
          {"beyond_count", b.beyond_count},
          {"beyond", beyond},
          {"worst", b.worst ? band_direction_json(*b.worst) : json(nullptr)},
          {"floor_ppm", {{"median", b.floor_median * 1e6}, {"p90", b.floor_p90 * 1e6}}},
          {"scale_drift_ppm", b.scale_drift * 1e6}};
}

Verdict with_band(Verdict bound, const OutputBand& b) {
  judgement::Tally t;
  t.add(bound);
  if (!b.not_computed) t.add(judgement::of_channels(0, static_cast<std::int64_t>(b.beyond_count)));
  return t.verdict();
}

}  // namespace foldcheck
