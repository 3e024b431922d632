// Terminal rendering of `foldcheck accuracy-diff` results, from their typed view
// (views/accuracy_diff.hpp).
#include <algorithm>

#include <fmt/format.h>

#include "band_text.hpp"
#include "foldcheck/reports/layer_names.hpp"
#include "foldcheck/reports/model_text.hpp"
#include "foldcheck/reports/run_answer.hpp"
#include "foldcheck/reports/summary.hpp"
#include "foldcheck/reports/text.hpp"
#include "model_text_common.hpp"

namespace foldcheck::reports {

using json = nlohmann::json;
namespace v = result::views;

namespace {

// A number to 3 significant digits; none (an infinite value in JSON) as "inf".
std::string num(const v::Figure& x) { return x ? fmt::format("{:.3g}", *x) : std::string("inf"); }

// The non-zero element kinds of a comparison ("nan 3, inf_mismatch 1"), not raw JSON.
std::string kinds_text(const json& kinds) {
  std::string s;
  for (const auto& [k, n] : kinds.items())
    if (n.is_number() && n.get<double>() != 0) s += fmt::format("{}{} {}", s.empty() ? "" : ", ", k, n.dump());
  return s.empty() ? std::string("no special values") : s;
}

// The recipe column's width: its longest entry ("pytorch (float16 arithmetic)"), at least 13.
std::size_t recipe_width(const v::AccuracyDiff& r) {
  std::size_t w = 13;
  for (const v::AdiffLayer& l : r.layers)
    if (l.fold && !l.fold->recipes.empty()) w = std::max(w, l.fold->shown().recipe.size());
  return w;
}

// The model line and the observed model if any.
std::string model_lines(const v::AccuracyDiff& r) {
  std::string s = fmt::format("foldcheck accuracy-diff {} — {} nodes, opset {}{}\n", r.model_path, r.nodes, r.opset,
                              r.producer.empty() ? "" : ", from " + r.producer);
  if (r.observed)
    s += fmt::format("  observed folded model: {}\n  matching: {}\n", r.observed->path, r.observed->matching);
  return s;
}

// The model lines, the legend, the answer and the table's column headings (or, without a
// layer, the answer alone: why nothing was compared).
std::string heading(const v::AccuracyDiff& r, const std::optional<AnswerLines>& answer) {
  const bool observed = r.observed.has_value();
  std::string s = model_lines(r);
  s += fmt::format(
      "  {} layer -> BatchNormalization pair(s). Folded parameters: {} (|ULP| against the exact fold, max; "
      "ratio = worst distance / the recipe's bound). Outputs: the layer on its real input, fused ({}) and "
      "unfused, against the certified reference (|ULP| p99.9; ratio to the deterministic bound). > 1: "
      "UNEXPECTED.\n\n",
      r.layers.size(),
      observed ? "the observed folded model, closest recipe" : "each recipe's own fold, worst recipe shown",
      r.end_to_end ? r.end_to_end->fused_recipe.value_or("-") : std::string("-"));
  if (r.layers.empty()) {  // no table: the answer says why, first
    for (std::size_t i = 0; i < r.reasoning.size(); ++i)
      s += (i == 0 ? "  answer: " + std::string(name(r.verdict)) + ": " : std::string("    ")) + r.reasoning[i] + "\n";
    return s;
  }
  // The answer first (run_answer.hpp), from the result's summary, as every other format has it.
  s += "  answer: " + answer->headline + "\n";
  for (const std::string& m : answer->more) s += "    " + m + "\n";
  s += "\n";
  s += fmt::format("  {:<30} {:<11} {:>9} {:>9} {:>6} {:<{}} {:>10} {:>7} {:>10} {:>7} {:<13} {}\n", "layer", "verdict",
                   "w |ULP|", "b |ULP|", "ratio", "recipe", recipe_width(r), "fused p99.9", "ratio", "unfused", "ratio",
                   "dominant", observed ? "worst channel" : "");
  return s;
}

// A layer's activation columns: fused and unfused p99.9 and ratio, the dominant stage ("-" without them).
std::string activation_cells(const v::AdiffLayer& l) {
  if (!l.fused) return fmt::format("{:>10} {:>7} {:>10} {:>7} {:<13}", "-", "-", "-", "-", "-");
  return fmt::format("{:>10} {:>7} {:>10} {:>7} {:<13}", num(l.fused->p99_9_abs_ulp), num(l.fused->worst_ratio),
                     num(l.unfused->p99_9_abs_ulp), num(l.unfused->worst_ratio), l.fused->dominant_stage.value_or("-"));
}

// One layer's row of the table.
std::string layer_row(const v::AdiffLayer& l, const std::string& shown_name, bool observed, std::size_t rw) {
  if (!l.fold) return fmt::format("  {:<30} {:<11} {}\n", shown_name, name(l.verdict), l.observed_note.value_or(""));
  const v::AdiffRecipe& shown = l.fold->shown();
  auto max_ulp = [](const std::optional<v::Figure>& cmp) { return cmp ? num(*cmp) : std::string("-"); };
  const std::string act = activation_cells(l);
  std::string worst;
  if (observed && l.worst_channel) worst = fmt::format("{} ({})", *l.worst_channel, shown.worst_in);
  std::string row = fmt::format("  {:<30} {:<11} {:>9} {:>9} {:>6} {:<{}} {} {}\n", shown_name, name(l.verdict),
                                max_ulp(shown.weights_max_abs_ulp), max_ulp(shown.bias_max_abs_ulp),
                                num(shown.worst_ratio), shown.recipe, rw, act, worst);
  if (l.observed_note) row += "      " + *l.observed_note + "\n";  // not the layer: what differs
  return row;
}

// The end-to-end outputs of the model: unfused and fused |ULP|, and top-1 agreement.
std::string outputs_text(const v::AdiffEndToEnd& e) {
  std::string s;
  for (const v::AdiffOutput& o : e.outputs) {
    s += fmt::format("    {} {}: unfused |ULP| p99.9 {}, max {}; fused ({}) p99.9 {}, max {}\n", o.name, o.shape.dump(),
                     num(o.unfused_p99_9), num(o.unfused_max_abs), e.fused_recipe.value(), num(o.fused_p99_9),
                     num(o.fused_max_abs));
    if (o.top1)
      s += fmt::format(
          "      top-1 agreement over {} rows: unfused/reference {}, fused/reference {}, fused/unfused {}\n",
          o.top1->rows, o.top1->unfused_vs_reference, o.top1->fused_vs_reference, o.top1->fused_vs_unfused);
  }
  return s;
}

// The observed output's optional lines: its worst element, top-1 agreement, bound in ULP.
std::string observed_output_extras(const v::AdiffObservedOutput& o) {
  std::string s;
  if (o.worst)
    s += fmt::format("      worst element {}: observed {:.9g}, reference {:.17g}, bound {:.3g}\n",
                     o.worst->index.dump(), o.worst->observed, o.worst->reference, o.worst->bound);
  if (o.top1)
    s += fmt::format("      top-1 agreement with the reference: {}/{}\n", o.top1->observed_vs_reference, o.top1->rows);
  if (o.bound_ulp)
    s += fmt::format(
        "      bound: median {} ULP of float32 (min {}, max {}); foldcheck's own float32 runs use {} "
        "(unfused) and {} (fused) of it\n",
        num(o.bound_ulp->median), num(o.bound_ulp->min), num(o.bound_ulp->max), num(o.bound_ulp->unfused_worst_ratio),
        num(o.bound_ulp->fused_worst_ratio));
  return s;
}

// The observed folded model's output against the reference and the end-to-end bound.
std::string observed_output_text(const v::AdiffObservedOutput& o) {
  // No bound_check when no element was finite on both sides (an all-Inf output): the
  // kinds say what was found instead.
  const std::string against = o.bound_check
                                  ? fmt::format("worst ratio to the end-to-end bound {} (elements beyond: {})",
                                                num(o.bound_check->worst_ratio), o.bound_check->beyond_bound)
                                  : fmt::format("no element finite on both sides ({})", kinds_text(o.kinds));
  std::string s =
      fmt::format("    observed output {} {}: |ULP| p50 {}, p99.9 {}, max {}; {} -> {}\n", o.path, o.shape.dump(),
                  num(o.ulp_p50), num(o.ulp_p99_9), num(o.ulp_max_abs), against, name(o.verdict));
  s += observed_output_extras(o);
  if (o.band) s += output_band_text(*o.band, "      ");
  s += fmt::format("      {}\n", o.bound);
  return s;
}

// Whether every layer's folded parameters are within their bounds.
bool folds_expected(const v::AccuracyDiff& r) {
  return std::ranges::all_of(r.layers, [](const v::AdiffLayer& l) {
    return !l.observed_note && !(l.fold && l.fold->verdict != Verdict::Expected);
  });
}

// The observed output's section, with the question its verdict raises when every fold passed.
std::string observed_output_section(const v::AccuracyDiff& r, const v::AdiffObservedOutput& o) {
  std::string s = observed_output_text(o);
  if (o.verdict != Verdict::Expected && folds_expected(r))
    s += r.observed
             ? "      every folded layer above is within its bound: was the observed output computed from this input "
               "(--input)?\n"
             : "      every layer above is within its bound with foldcheck's own folds: was the observed output "
               "computed from this input (--input), and are the engine's folded weights right (--observed "
               "FOLDED.onnx)?\n";
  return s;
}

// The end-to-end section (or why it was not run). Its fused run is foldcheck's own fold of
// the original model: with --observed it says so, so that its verdict is not read as the
// observed model's (whose weights the layers above judge, and whose outputs only
// --observed-output does).
std::string end_to_end_text(const v::AccuracyDiff& r) {
  const v::AdiffEndToEnd& e = *r.end_to_end;
  const bool observed = r.observed.has_value();
  if (e.not_run)
    return fmt::format("\n  end to end: not run ({}); the weight-level checks above still apply\n", *e.not_run);
  std::string s =
      fmt::format("\n  end to end (input {}, shape {}; reference: {}):\n", e.input, e.input_shape.dump(), e.reference);
  s += outputs_text(e);
  if (observed)
    s += fmt::format(
        "    (fused = foldcheck's own {} fold of the original model, not the observed model's weights: "
        "those are judged per layer above{})\n",
        e.fused_recipe.value(),
        e.observed_output ? "" : "; give its outputs with --observed-output to check them end to end");
  if (e.observed_output) s += observed_output_section(r, *e.observed_output);
  if (e.observed_output_not_checked) s += "    observed output not checked: " + *e.observed_output_not_checked + "\n";
  s += fmt::format("    first layer whose drift leaves its bound: {}; end-to-end verdict{}: {}\n",
                   e.first_layer_beyond_bound.value_or("none"), " of foldcheck's own runs", name(e.verdict));
  if (e.verdict != r.verdict) {
    const bool out_bad = e.observed_output && e.observed_output->verdict != Verdict::Expected;
    s += fmt::format("    (the overall verdict, {}, also judges {})\n", name(r.verdict),
                     overall_also_judges(out_bad, observed));
  }
  return s;
}

}  // namespace

std::string accuracy_diff_text(const v::AccuracyDiff& r, const std::optional<AnswerLines>& answer) {
  const bool observed = r.observed.has_value();
  std::string s = heading(r, answer);
  std::vector<std::string> names;
  for (const v::AdiffLayer& l : r.layers) names.push_back(l.name);
  const std::vector<std::string> shown = short_layer_names(names, 30);  // unambiguous within the column
  const std::size_t rw = recipe_width(r);
  for (std::size_t i = 0; i < names.size(); ++i) s += layer_row(r.layers[i], shown[i], observed, rw);
  if (r.end_to_end) s += end_to_end_text(r);
  if (!r.unpaired.empty()) {
    s += "\n  BatchNormalization nodes not paired with a layer:\n";
    for (const auto& u : r.unpaired) s += fmt::format("    {}: {}\n", u.batchnorm, u.reason);
  }
  s += fmt::format("\nverdict: {}{}\n", name(r.verdict), seconds_text(r.seconds));
  return s;
}

// The answer comes from the result's summary (summary.hpp, run_answer.hpp), read from the
// JSON as every other format reads it; only a result with layers has one.
std::string accuracy_diff_text(const json& result) {
  const v::AccuracyDiff r = v::AccuracyDiff::from_json(result);
  std::optional<AnswerLines> answer;
  if (!r.layers.empty()) answer = answer_lines(*summary_of(r).answer);
  return accuracy_diff_text(r, answer);
}

}  // namespace foldcheck::reports
