// Terminal rendering of `foldcheck engines` results, from their typed view (views/engines.hpp).
#include <fmt/format.h>

#include "band_text.hpp"
#include "foldcheck/reports/model_text.hpp"
#include "foldcheck/reports/text.hpp"
#include "model_text_common.hpp"

namespace foldcheck::reports {

using json = nlohmann::json;
namespace v = result::views;

namespace {

std::string num(const std::optional<double>& x) { return x ? fmt::format("{:.3g}", *x) : std::string("-"); }

// A name in w columns: its start and its end, the middle elided (the ends tell layers apart).
std::string shorten(std::string s, std::size_t w) {
  if (s.size() <= w) return s;
  const std::size_t head = (w - 1) / 3;
  return s.substr(0, head) + "…" + s.substr(s.size() - (w - 1 - head));
}

// A layer's weight cells: the ratio to the closest recipe's bound and the worst channel.
std::string weight_cells(const std::optional<v::EngineWeights>& w) {
  if (!w) return fmt::format("{:>8} {:<13} {:>6}", "-", "-", "-");
  if (w->not_folded) return fmt::format("{:>8} {:<13} {:>6}", "unfolded", "-", "-");
  return fmt::format("{:>8} {:<13} {:>6}", num(w->worst_ratio), w->closest_recipe.value_or("-"),
                     w->worst_channel ? std::to_string(*w->worst_channel) : std::string("-"));
}

// A layer's output cells: the ratios to the deterministic and probabilistic bounds, and the
// channel statistic's worst channel (rho and its estimated threshold, in ppm).
std::string output_cells(const std::optional<v::EngineOutputs>& o) {
  if (!o || o->not_checked || o->left_out)
    return fmt::format("{:>8} {:>8} {:>9} {:>9} {:>9} {:>6}", "-", "-", "-", "-", "-", "-");
  std::string rho = "-", est = "-", bound = "-", chan = "-";  // none for Winograd or unfolded layers (not_computed)
  if (o->worst) {
    rho = fmt::format("{:+.3g}", o->worst->rho_ppm);
    est = fmt::format("{:.3g}", o->worst->estimated_threshold_ppm);
    bound = fmt::format("{:.3g}", o->worst->threshold_ppm);
    chan = std::to_string(o->worst->channel);
  }
  if (o->nonfinite > 0)
    return fmt::format("{:>8} {:>8} {:>9} {:>9} {:>9} {:>6}", "NaN/Inf", "NaN/Inf", rho, est, bound,
                       chan);  // within no bound: the ratios of the rest would hide them
  return fmt::format("{:>8} {:>8} {:>9} {:>9} {:>9} {:>6}", num(o->worst_ratio), num(o->probabilistic_worst_ratio), rho,
                     est, bound, chan);
}

// Why a layer's outputs say less than they might ("" for nothing to say).
std::string layer_note(const v::EngineLayer& l) {
  std::string note;
  if (l.outputs && l.outputs->not_checked) note = "outputs not checked: " + *l.outputs->not_checked;
  if (l.outputs && l.outputs->left_out) note = "left out by the engine: " + *l.outputs->left_out;
  if (l.outputs && l.outputs->channels_not_computed)
    note = "channel statistic not computed: " + *l.outputs->channels_not_computed;
  if (l.outputs && l.outputs->too_wide) note = "outputs within a bound too wide to judge: " + *l.outputs->too_wide;
  if (l.outputs && l.outputs->nonfinite > 0)
    note = fmt::format("{} output(s) NaN or infinite where the layer's value is finite: no rounding gives them",
                       l.outputs->nonfinite);
  if (l.input_mismatch) note = "input: " + *l.input_mismatch;
  if (l.not_the_layer) note = "not the model's layer: " + *l.not_the_layer;  // its outputs were not compared
  return note;
}

// The table of an engine's layers, a reason shared by consecutive layers said once.
std::string layers_table(const std::vector<v::EngineLayer>& layers) {
  std::string s =
      fmt::format("  {:<28} {:<11} {:>8} {:<13} {:>6} {:>8} {:>8} {:>9} {:>9} {:>9} {:>6}\n", "layer", "verdict",
                  "w ratio", "recipe", "w chan", "ratio", "prob", "rho ppm", "est ppm", "bound ppm", "chan");
  std::string last_note;
  for (const v::EngineLayer& l : layers) {
    s += fmt::format("  {:<28} {:<11} {} {}\n", shorten(l.name, 28), l.verdict ? name(*l.verdict) : "LEFT OUT",
                     weight_cells(l.weights), output_cells(l.outputs));
    const std::string note = layer_note(l);
    if (!note.empty() && note != last_note) s += "      " + note + "\n";
    else if (!note.empty()) s += "      (the same)\n";
    last_note = note;
  }
  return s;
}

std::string engine_block(const v::EngineRun& e) {
  std::string s =
      fmt::format("{} — {}  {}  ({:.1f} s)\n", e.label,
                  e.engine.empty() ? "(no engine named: the adapter wrote no manifest foldcheck read)" : e.engine,
                  name(e.verdict), e.seconds);
  if (e.failed) return s + "  not checked: " + *e.failed + "\n\n";
  for (const std::string& n : e.notes) s += "  note: " + n + "\n";
  if (e.arithmetic != "float32" || e.algorithm != "direct")
    s += fmt::format("  held to the bounds of arithmetic {}, algorithm {} (where it applies)\n", e.arithmetic,
                     e.algorithm);
  if (e.fusion_preserved == false)
    s += "  the adapter reports that its per-layer run did not reproduce the fused run's outputs: layer outputs not "
         "judged\n";
  for (const v::EngineFinalOutput& f : e.final_outputs) {
    s += fmt::format("  final output '{}': {} (worst ratio {} to the end-to-end bound, {} runs)\n", f.name,
                     name(f.verdict), num(f.worst_ratio), f.samples);
    if (f.band) s += output_band_text(*f.band, "    ");
  }
  if (e.final_not_checked) s += "  final outputs not judged: " + *e.final_not_checked + "\n";
  s += fmt::format("  first layer beyond its bound or estimate: weights {}, outputs {}\n",
                   e.first_weights_beyond.value_or("none"), e.first_outputs_beyond.value_or("none"));
  return s + layers_table(e.layers) + "\n";
}

}  // namespace

std::string engines_text(const v::Engines& r) {
  std::string s = fmt::format("foldcheck engines {} — {} layer -> BatchNormalization pair(s)\n", r.model_path, r.pairs);
  s += "  w ratio: the folded weights' worst distance to the exact fold / the bound of the recipe they come closest to "
       "(recipe; w chan: the worst channel when beyond). ratio, prob: each conv's output on the engine's own input "
       "against "
       "the certified original layer, worst distance / the deterministic and the probabilistic bound. rho: the worst "
       "channel's (chan) estimated common relative change; est: what honest kernels reach on this input (estimated); "
       "bound: what any correct computation reaches (false alarm <= " +
       fmt::format("{:.2g}", r.false_alarm_per_channel) +
       " per channel). w ratio or ratio > 1, |rho| > bound: UNEXPECTED; |rho| > est only: SUSPICIOUS.\n\n";
  for (const v::EngineRun& e : r.engines) s += engine_block(e);
  s += "verdict: " + std::string(name(r.verdict)) + seconds_text(r.seconds) + "\n";
  return s;
}

std::string engines_text(const json& result) { return engines_text(v::Engines::from_json(result)); }

}  // namespace foldcheck::reports
