// Terminal rendering of `foldcheck accuracy-diff` results.
#include <algorithm>

#include <fmt/format.h>

#include "foldcheck/reports/layer_names.hpp"
#include "foldcheck/reports/run_answer.hpp"
#include "foldcheck/reports/summary.hpp"
#include "foldcheck/reports/text.hpp"
#include "shown_recipe.hpp"

namespace foldcheck::reports {

using json = nlohmann::json;

namespace {

// A number to 3 significant digits; null (an infinite value in JSON) as "inf".
std::string num(const json& v) { return v.is_null() ? std::string("inf") : fmt::format("{:.3g}", v.get<double>()); }

// The non-zero element kinds of a comparison ("nan 3, inf_mismatch 1"), not raw JSON.
std::string kinds_text(const json& kinds) {
  std::string s;
  for (const auto& [k, v] : kinds.items())
    if (v.is_number() && v.get<double>() != 0) s += fmt::format("{}{} {}", s.empty() ? "" : ", ", k, v.dump());
  return s.empty() ? std::string("no special values") : s;
}

// The recipe column's width: its longest entry ("pytorch (float16 arithmetic)"), at least 13.
std::size_t recipe_width(const json& r) {
  std::size_t w = 13;
  for (const json& l : r["layers"])
    if (l.contains("fold") && !l["fold"]["recipes"].empty())
      w = std::max(w, shown_recipe(l["fold"])["recipe"].get_ref<const std::string&>().size());
  return w;
}

// The model line, the observed model if any, the legend and the table's column headings.
std::string heading(const json& r, bool observed) {
  std::string s;
  const json& m = r["model"];
  s += fmt::format("foldcheck accuracy-diff {} — {} nodes, opset {}{}\n", m["path"].get<std::string>(),
                   m["nodes"].get<std::size_t>(), m["opset"].get<std::int64_t>(),
                   m["producer"].get<std::string>().empty() ? "" : ", from " + m["producer"].get<std::string>());
  if (observed)
    s += fmt::format("  observed folded model: {}\n  matching: {}\n", r["observed"]["path"].get<std::string>(),
                     r["observed"]["matching"].get<std::string>());
  s += fmt::format("  {} layer -> BatchNormalization pair(s). Folded parameters: {} (|ULP| against the exact fold, max; "
                   "ratio = worst distance / the recipe's bound). Outputs: the layer on its real input, fused ({}) and "
                   "unfused, against the certified reference (|ULP| p99.9; ratio to the deterministic bound). > 1: "
                   "UNEXPECTED.\n\n",
                   r["layers"].size(),
                   observed ? "the observed folded model, closest recipe" : "each recipe's own fold, worst recipe shown",
                   r.contains("end_to_end") ? r["end_to_end"].value("fused_recipe", std::string("-")) : std::string("-"));
  if (r["layers"].empty()) {  // no table: the answer says why, first
    const json& why = r.value("reasoning", json::array());
    for (std::size_t i = 0; i < why.size(); ++i)
      s += (i == 0 ? "  answer: " + r["verdict"].get<std::string>() + ": " : std::string("    ")) + why[i].get<std::string>() + "\n";
    return s;
  }
  // The answer first (run_answer.hpp), from the result's summary, as every other format has it.
  const AnswerLines a = answer_lines(summarize(r)["answer"]);
  s += "  answer: " + a.headline + "\n";
  for (const std::string& m : a.more) s += "    " + m + "\n";
  s += "\n";
  s += fmt::format("  {:<30} {:<11} {:>9} {:>9} {:>6} {:<{}} {:>10} {:>7} {:>10} {:>7} {:<13} {}\n", "layer", "verdict",
                   "w |ULP|", "b |ULP|", "ratio", "recipe", recipe_width(r), "fused p99.9", "ratio", "unfused", "ratio", "dominant",
                   observed ? "worst channel" : "");
  return s;
}

// A layer's activation columns: fused and unfused p99.9 and ratio, the dominant stage ("-" without them).
std::string activation_cells(const json& l) {
  std::string act = fmt::format("{:>10} {:>7} {:>10} {:>7} {:<13}", "-", "-", "-", "-", "-");
  if (l.contains("activations") && l["activations"].contains("fused")) {
    const json& a = l["activations"];
    act = fmt::format("{:>10} {:>7} {:>10} {:>7} {:<13}", num(a["fused"]["p99_9_abs_ulp"]), num(a["fused"]["worst_ratio"]),
                      num(a["unfused"]["p99_9_abs_ulp"]), num(a["unfused"]["worst_ratio"]),
                      a["fused"].value("dominant_stage", "-"));
  }
  return act;
}

// One layer's row of the table.
std::string layer_row(const json& l, const std::string& name, bool observed, std::size_t rw) {
  if (!l.contains("fold")) return fmt::format("  {:<30} {:<11} {}\n", name, l["verdict"].get<std::string>(), l.value("observed_note", ""));
  const json& f = l["fold"];
  const json* shown = &shown_recipe(f);
  auto max_ulp = [&](const json& cmp) { return cmp.is_null() ? std::string("-") : num(cmp["ulp"]["max_abs"]); };
  const std::string act = activation_cells(l);
  std::string worst;
  if (observed && !l["worst_channel"].is_null())
    worst = fmt::format("{} ({})", l["worst_channel"].get<std::int64_t>(), (*shown)["worst_in"].get<std::string>());
  return fmt::format("  {:<30} {:<11} {:>9} {:>9} {:>6} {:<{}} {} {}\n", name, l["verdict"].get<std::string>(),
                     max_ulp((*shown)["weights"]), max_ulp((*shown)["bias"]), num((*shown)["worst_ratio"]),
                     (*shown)["recipe"].get<std::string>(), rw, act, worst);
}

// The end-to-end outputs of the model: unfused and fused |ULP|, and top-1 agreement.
std::string outputs_text(const json& e) {
  std::string s;
  for (const json& o : e["outputs"]) {
    s += fmt::format("    {} {}: unfused |ULP| p99.9 {}, max {}; fused ({}) p99.9 {}, max {}\n", o["name"].get<std::string>(),
                     o["shape"].dump(), num(o["unfused"]["ulp"]["p99_9"]), num(o["unfused"]["ulp"]["max_abs"]),
                     e["fused_recipe"].get<std::string>(), num(o["fused"]["ulp"]["p99_9"]), num(o["fused"]["ulp"]["max_abs"]));
    if (o.contains("top1_agreement")) {
      const json& t = o["top1_agreement"];
      s += fmt::format("      top-1 agreement over {} rows: unfused/reference {}, fused/reference {}, fused/unfused {}\n",
                       t["rows"].get<std::int64_t>(), t["unfused_vs_reference"].get<std::int64_t>(),
                       t["fused_vs_reference"].get<std::int64_t>(), t["fused_vs_unfused"].get<std::int64_t>());
    }
  }
  return s;
}

// The observed folded model's output against the reference and the end-to-end bound.
std::string observed_output_text(const json& o) {
  std::string s;
  const json& c = o["comparison"];
  // No bound_check when no element was finite on both sides (an all-Inf output): the
  // kinds say what was found instead.
  const std::string against = c.contains("bound_check")
                                  ? fmt::format("worst ratio to the end-to-end bound {} (elements beyond: {})",
                                                num(c["bound_check"]["worst_ratio"]),
                                                c["bound_check"]["beyond_bound"].get<std::int64_t>())
                                  : fmt::format("no element finite on both sides ({})", kinds_text(c["kinds"]));
  s += fmt::format("    observed output {} {}: |ULP| p50 {}, p99.9 {}, max {}; {} -> {}\n", o["path"].get<std::string>(),
                   o["shape"].dump(), num(c["ulp"]["p50"]), num(c["ulp"]["p99_9"]), num(c["ulp"]["max_abs"]), against,
                   o["verdict"].get<std::string>());
  if (o.contains("worst"))
    s += fmt::format("      worst element {}: observed {:.9g}, reference {:.17g}, bound {:.3g}\n", o["worst"]["index"].dump(),
                     o["worst"]["observed"].get<double>(), o["worst"]["reference"].get<double>(),
                     o["worst"]["bound"].get<double>());
  if (o.contains("top1_agreement"))
    s += fmt::format("      top-1 agreement with the reference: {}/{}\n",
                     o["top1_agreement"]["observed_vs_reference"].get<std::int64_t>(),
                     o["top1_agreement"]["rows"].get<std::int64_t>());
  if (o.contains("bound_ulp"))
    s += fmt::format("      bound: median {} ULP of float32 (min {}, max {}); foldcheck's own float32 runs use {} "
                     "(unfused) and {} (fused) of it\n",
                     num(o["bound_ulp"]["median"]), num(o["bound_ulp"]["min"]), num(o["bound_ulp"]["max"]),
                     num(o["foldcheck_runs"]["unfused_worst_ratio"]), num(o["foldcheck_runs"]["fused_worst_ratio"]));
  s += fmt::format("      {}\n", o["bound"].get<std::string>());
  return s;
}

// Whether every layer's folded parameters are within their bounds.
bool folds_expected(const json& r) {
  for (const json& l : r["layers"])
    if (l.contains("observed_note") || (l.contains("fold") && l["fold"]["verdict"] != "EXPECTED")) return false;
  return true;
}

// The end-to-end section (or why it was not run). Its fused run is foldcheck's own fold of
// the original model: with --observed it says so, so that its verdict is not read as the
// observed model's (whose weights the layers above judge, and whose outputs only
// --observed-output does).
std::string end_to_end_text(const json& r) {
  const json& e = r["end_to_end"];
  const bool observed = r.contains("observed");
  if (e.contains("not_run"))
    return fmt::format("\n  end to end: not run ({}); the weight-level checks above still apply\n",
                       e["not_run"].get<std::string>());
  std::string s = fmt::format("\n  end to end (input {}, shape {}; reference: {}):\n", e["input"].get<std::string>(),
                              e["input_shape"].dump(), e["reference"].get<std::string>());
  s += outputs_text(e);
  if (observed)
    s += fmt::format("    (fused = foldcheck's own {} fold of the original model, not the observed model's weights: "
                     "those are judged per layer above{})\n",
                     e["fused_recipe"].get<std::string>(),
                     e.contains("observed_output") ? "" : "; give its outputs with --observed-output to check them end to end");
  if (e.contains("observed_output")) {
    s += observed_output_text(e["observed_output"]);
    if (e["observed_output"]["verdict"] != "EXPECTED" && folds_expected(r))
      s += observed ? "      every folded layer above is within its bound: was the observed output computed from this input "
                      "(--input)?\n"
                    : "      every layer above is within its bound with foldcheck's own folds: was the observed output "
                      "computed from this input (--input), and are the engine's folded weights right (--observed "
                      "FOLDED.onnx)?\n";
  }
  s += fmt::format("    first layer whose drift leaves its bound: {}; end-to-end verdict{}: {}\n",
                   e["first_layer_beyond_bound"].is_null() ? "none" : e["first_layer_beyond_bound"].get<std::string>(),
                   " of foldcheck's own runs", e["verdict"].get<std::string>());
  if (e["verdict"] != r["verdict"]) {
    const bool out_bad = e.contains("observed_output") && e["observed_output"]["verdict"] != "EXPECTED";
    s += fmt::format("    (the overall verdict, {}, also judges {})\n", r["verdict"].get<std::string>(),
                     overall_also_judges(out_bad, observed));
  }
  return s;
}

}  // namespace

std::string accuracy_diff_text(const json& r) {
  const bool observed = r.contains("observed");
  std::string s = heading(r, observed);
  std::vector<std::string> names;
  for (const json& l : r["layers"]) names.push_back(l["name"]);
  const std::vector<std::string> shown = short_layer_names(names, 30);  // unambiguous within the column
  for (std::size_t i = 0; i < names.size(); ++i) s += layer_row(r["layers"][i], shown[i], observed, recipe_width(r));
  if (r.contains("end_to_end")) s += end_to_end_text(r);
  if (!r["unpaired"].empty()) {
    s += "\n  BatchNormalization nodes not paired with a layer:\n";
    for (const json& u : r["unpaired"])
      s += fmt::format("    {}: {}\n", u["batchnorm"].get<std::string>(), u["reason"].get<std::string>());
  }
  s += fmt::format("\nverdict: {}{}\n", r["verdict"].get<std::string>(), seconds_suffix(r));
  return s;
}

}  // namespace foldcheck::reports
