// The answer of an accuracy-diff summary (run_answer.hpp's model_answer), from its typed
// summary (views/summary.hpp).
#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "foldcheck/reports/run_answer.hpp"
#include "foldcheck/reports/summary.hpp"

namespace foldcheck::reports {

using json = nlohmann::json;
namespace views = result::views;

namespace {

std::string ratio_text(double r) { return std::isinf(r) ? std::string("unbounded") : fmt::format("{:.3g}", r); }

// A layer's worst ratio to a bound (-1: none): its fold's, or its fused or unfused activations'.
std::pair<double, std::string> layer_worst(const views::LayerSummary& l) {
  std::pair<double, std::string> w{l.fold ? l.fold->fold_ratio.value_or(-1.0) : -1.0, "folded parameters"};
  for (const auto& [p, a] : {std::pair{"fused", &l.fused}, std::pair{"unfused", &l.unfused}})
    if (*a && (*a)->bound_ratio.value_or(-1.0) > w.first)
      w = {*(*a)->bound_ratio, std::string(p) + " outputs on its real input"};
  return w;
}

// An observed output beyond its band only (SUSPICIOUS): the direction it moved along first.
std::string band_reason(const views::ObservedOutput& o) {
  const views::BandSummary& b = *o.band;
  return fmt::format(
      "The observed output is SUSPICIOUS: along {} of layer {} it moved {} times as far as honest float32 runs do (a "
      "change of about {} ppm there{}); element by element it is within {} of its end-to-end rounding-error bound, "
      "which cannot see such a change.",
      b.direction, b.layer, b.ratio ? ratio_text(*b.ratio) : "?",
      b.change_ppm ? fmt::format("{:.3g}", *b.change_ppm) : "?",
      b.beyond > 1 ? fmt::format("; {} directions are beyond their bands, the one whose change alone explains most "
                                 "of the output's named",
                                 b.beyond)
                   : "",
      o.bound_ratio ? ratio_text(*o.bound_ratio) : "?");
}

// An EXPECTED observed output: what was judged, and what it could not see.
std::string expected_reason(const views::ObservedOutput& o) {
  std::string s = fmt::format("The observed output is EXPECTED: within its end-to-end rounding-error bound{}",
                              o.bound_ratio ? fmt::format(" ({} of it)", ratio_text(*o.bound_ratio)) : "");
  if (o.band && o.band->floor_ppm)
    return s + fmt::format(
                   " and within the band of honest float32 runs along every layer's channels and BatchNorm eps; a "
                   "one-channel change above about {:.3g} ppm would have been seen here (the median over channels), "
                   "smaller ones need the folded weights (--observed FOLDED.onnx).",
                   *o.band->floor_ppm);
  return s + ".";
}

// The end to end's part of a model's answer: the observed output when given (its verdict, and
// what it could not see), else foldcheck's own end-to-end runs beyond their bound.
std::string end_to_end_reason(const views::Summary& s) {
  if (!s.end_to_end) return "";
  const views::EndToEndSummary& e = *s.end_to_end;
  if (e.observed_output) {
    const views::ObservedOutput& o = *e.observed_output;
    if (o.verdict == Verdict::Expected) return expected_reason(o);
    if (o.verdict == Verdict::Suspicious && o.band && o.band->beyond > 0) return band_reason(o);
    const std::optional<double> r = o.bound_ratio;
    return fmt::format("The observed output is {}{}.", name(o.verdict),
                       r ? fmt::format(": {} times its end-to-end rounding-error bound", ratio_text(*r))
                         : std::string());
  }
  if (e.verdict == Verdict::Unexpected)
    return "foldcheck's own end-to-end runs of the model are UNEXPECTED: some layer's outputs leave their bound on its "
           "real activations.";
  return "";
}

// The layer the answer names: the first not EXPECTED of the largest ratio, else the layer of
// the largest ratio (nullptr without layers).
const views::LayerSummary* worst_layer(const views::Summary& summary, std::pair<double, std::string>& wr) {
  const views::LayerSummary* worst = nullptr;
  wr = {-1, ""};
  for (const views::LayerSummary& l : summary.layers) {
    const auto r = layer_worst(l);
    const bool bad = l.verdict != Verdict::Expected, worst_bad = worst && worst->verdict != Verdict::Expected;
    if (!worst || (bad && !worst_bad) || (bad == worst_bad && r.first > wr.first)) {
      worst = &l;
      wr = r;
    }
  }
  return worst;
}

// Whether some layer's outputs were run (fused or unfused activations): not with weights only.
bool any_layer_ran(const views::Summary& summary) {
  return std::ranges::any_of(summary.layers, [](const views::LayerSummary& l) { return l.fused || l.unfused; });
}

std::vector<std::string> model_reasons(const views::Summary& summary) {
  std::vector<std::string> why;
  std::pair<double, std::string> wr;
  const views::LayerSummary* worst = worst_layer(summary, wr);
  const std::string e2e = end_to_end_reason(summary);
  const bool layer_bad = worst && worst->verdict != Verdict::Expected;
  // The observed output leads (the user's question); else an end-to-end cause leads when no
  // layer is wrong.
  const bool observed = summary.end_to_end && summary.end_to_end->observed_output;
  if (!e2e.empty() && (observed || !layer_bad)) why.push_back(e2e);
  const std::optional<std::int64_t> channel = worst && worst->fold ? worst->fold->worst_channel : std::nullopt;
  if (layer_bad && worst->note)  // the observed layer is not the model's (or not folded): what differs says why
    why.push_back(fmt::format("Layer {} is {}: {}.", worst->name, name(worst->verdict), *worst->note));
  else if (layer_bad)
    why.push_back(fmt::format("Layer {} is {}: its {} are {} times their rounding-error bound{}.", worst->name,
                              name(worst->verdict), wr.second, ratio_text(wr.first),
                              channel ? fmt::format(" (channel {})", *channel) : std::string()));
  else if (worst) {  // what was judged: no layer ran (weights only) says so
    const bool ran = any_layer_ran(summary);
    why.push_back(
        fmt::format("Every layer's folded parameters{} are within their rounding-error bounds "
                    "(closest: layer {}, its {} at {} of the bound){}.",
                    ran ? " and outputs" : "", worst->name, wr.second, ratio_text(wr.first),
                    ran ? "" : "; weights only: no output was compared"));
  }
  if (!e2e.empty() && layer_bad && !observed) why.push_back(e2e);
  return why;
}

}  // namespace

std::string overall_also_judges(bool observed_output_bad, bool observed_model) {
  return observed_output_bad ? "the observed output against the end-to-end bound"
         : observed_model    ? "the observed model's folded weights, per layer"
                             : "each layer's fold";
}

RunAnswer model_answer(const views::Summary& summary) {
  RunAnswer a;
  a.verdict = summary.verdict;
  // nothing compared: why, and what to do
  a.reasoning = summary.reasoning && !summary.reasoning->empty() ? *summary.reasoning : model_reasons(summary);
  return a;
}

json model_answer(const json& summary) { return model_answer(views::Summary::from_json(summary)).to_json(); }

}  // namespace foldcheck::reports
