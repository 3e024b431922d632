// Terminal rendering of `foldcheck diagnose` results, from their typed view (views/diagnose.hpp).
#include <fmt/format.h>

#include "foldcheck/reports/model_text.hpp"
#include "foldcheck/reports/text.hpp"

namespace foldcheck::reports {

using json = nlohmann::json;
namespace v = result::views;

namespace {
std::string ratio(const v::DiagnoseRatio& r) { return r.value ? fmt::format("{:.3g}", *r.value) : r.text; }

// The calibrated band's lines: why none, or its worst channel, its width and the channels beyond it.
std::string band_lines(const v::DiagnoseBandView& b) {
  if (b.not_computed) return "  the band (common factor per channel): not computed — " + *b.not_computed + "\n";
  std::string s = fmt::format(
      "  the band (common factor per channel, {} honest computations, false alarm {:g} per channel): {} of {} "
      "channels beyond it; band median {:.3g} ppm, widest {:.3g} ppm\n",
      b.samples, b.alpha, b.beyond_count, b.tested, b.median_ppm, b.max_ppm);
  const auto row = [](const v::DiagnoseBandChannel& c) {
    return fmt::format("    channel {:<6} rho {:>10} ppm   band {:>8.3g} ppm   {:>8}x   honest rms {:.3g} ppm\n",
                       c.channel, ratio(c.rho_ppm), c.band_ppm, ratio(c.ratio), c.honest_rms_ppm);
  };
  if (b.beyond.empty() && b.worst) return s + "    worst:\n" + row(*b.worst);
  for (const v::DiagnoseBandChannel& c : b.beyond) s += row(c);
  if (b.beyond_count > static_cast<std::int64_t>(b.beyond.size()))
    s += fmt::format("    ... and {} more\n", b.beyond_count - static_cast<std::int64_t>(b.beyond.size()));
  return s;
}
}  // namespace

std::string diagnose_text(const v::Diagnose& r) {
  std::string s = "foldcheck diagnose — ";
  s += !r.has_conv ? "BatchNorm alone" : r.has_bn ? "conv + BatchNorm" : "conv (no BatchNorm)";
  s += fmt::format(", input {}, output {}, {}, arithmetic {}{}\n", r.input_shape.dump(), r.output_shape.dump(), r.dtype,
                   r.arithmetic, r.algorithm == "direct" ? "" : ", algorithm " + r.algorithm);
  if (!r.bn_defaulted.empty()) {
    std::string d;
    for (const std::string& v : r.bn_defaulted) d += (d.empty() ? "" : ", ") + v;
    s += "  BatchNorm parameters not given (a fresh BatchNorm's): " + d + "\n";
  }
  s += "  bound: " + r.bound_formula + "\n";
  if (!r.replays.empty()) {
    s += "  replays of the converted operands (the verdict uses " + r.replay + "):\n";
    for (const v::DiagnoseReplay& p : r.replays)
      s += fmt::format("    {:<40} {:<11} worst element {}x its bound\n", p.name, name(p.verdict), ratio(p.ratio));
  }
  const v::DiagnoseFit& g = r.as_given;
  s += fmt::format(
      "  the layer as given: {} — max |difference| {:.3g}, max {:.4g} ULP (p99 {:.3g}, p50 {:.3g}), worst "
      "element {}x its bound\n",
      name(g.verdict), r.max_abs_difference, g.max_abs_ulp, g.p99_abs_ulp, g.p50_abs_ulp, ratio(g.ratio));
  if (r.band) s += band_lines(*r.band);
  if (r.hypotheses.empty()) {
    s += "\nverdict: " + std::string(name(r.verdict)) + " — " + r.summary + "\n";
    return s;
  }
  s += "\n  hypotheses (best first): residual after assuming each, in ULP\n";
  s += fmt::format("    {:<34} {:<11} {:>10} {:>10} {:>10} {:>12}\n", "hypothesis", "verdict", "max|ULP|", "p99", "p50",
                   "x bound");
  for (const v::DiagnoseHypothesis& h : r.hypotheses) {
    const v::DiagnoseFit& f = h.fit;
    s += fmt::format("    {:<34} {:<11} {:>10.4g} {:>10.3g} {:>10.3g} {:>12}\n", h.name, name(f.verdict), f.max_abs_ulp,
                     f.p99_abs_ulp, f.p50_abs_ulp, ratio(f.ratio));
    if (h.eps)
      s += fmt::format("      eps recovered: {:g} (estimate {:.6g}; given {:g})\n", h.eps->recovered, h.eps->estimate,
                       h.eps->given);
  }
  s += "\nverdict: " + std::string(name(r.verdict)) + " — " + r.summary + "\n";
  if (r.fix) s += "fix: " + *r.fix + "\n";
  return s;
}

std::string diagnose_text(const json& result) { return diagnose_text(v::Diagnose::from_json(result)); }

}  // namespace foldcheck::reports
