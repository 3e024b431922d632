#include <algorithm>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "foldcheck/reports/row_notes.hpp"
#include "identical_rows.hpp"
#include "foldcheck/reports/run_answer.hpp"
#include "foldcheck/reports/text.hpp"

namespace foldcheck::reports {

using json = nlohmann::json;
using namespace result::views;  // the run's views: Run, DtypeResult, Order, Path, Comparison, ...

namespace {

std::string ratio(const Comparison& c) {
  if (!c.bound || !c.bound->worst_ratio) return "-";
  return fmt::format("{:.3g}", *c.bound->worst_ratio);
}

std::string bound_ulp(const Comparison& c) {
  if (!c.bound || !c.bound->bound_ulp_at_worst) return "-";
  return fmt::format("{:.3g}", *c.bound->bound_ulp_at_worst);
}

std::string pratio(const Comparison& c) {
  if (!c.probabilistic_bound || !c.probabilistic_bound->worst_ratio) return "";
  return fmt::format("{:.3g}", *c.probabilistic_bound->worst_ratio);
}

std::string kinds(const Comparison& c) {
  std::string s;
  for (const auto& [k, v] : c.kinds)
    if (v > 0 && k != "ppm_undefined") s += fmt::format(" {}={}", k, v);
  return s;
}

std::string scored_cells(const std::string& label, const Comparison& c) {
  return fmt::format("    {:<32} {:<11} {:>9.4g} {:>8.3g} {:>7.3g} {:>7.3g} {:>9.3g} {:>10.4g} {:>9} {:>7} {:>7}{}\n",
                     label, name(c.verdict), c.ulp.max_abs, c.ulp.p99_9, c.ulp.p99, c.ulp.p50, c.ulp.mean_abs,
                     c.ppm_max_abs, bound_ulp(c), ratio(c), pratio(c), kinds(c));
}

// A scored comparison's explanations in place (row_notes.hpp), indented under its row.
std::string notes_lines(const Comparison& c) {
  std::string notes;
  for (const std::string& n : row_notes(c.facts)) notes += "      -> " + n + "\n";
  return notes;
}

// A scored comparison's row, then its notes.
std::string scored_row(const std::string& label, const Comparison& c) {
  return scored_cells(label, c) + notes_lines(c);
}

// Rows (label, comparison) with identical numbers printed once (identical_rows.hpp): "3 paths,
// identical" with the names on the next line.
std::string scored_rows(const std::vector<std::pair<std::string, const Comparison*>>& rows, const std::string& plural) {
  std::vector<std::string> keys;
  std::vector<std::vector<std::string>> labels;
  for (const auto& [label, c] : rows) {
    keys.push_back(scored_row("", *c));
    labels.push_back({label});
  }
  std::string s;
  for (const auto& g : identical_groups(keys)) {
    const auto names = distinct_column(labels, g, 0);
    const Comparison& c = *rows[g[0]].second;
    if (names.size() == 1) {
      s += scored_row(names[0], c);
      continue;
    }
    s += scored_cells(fmt::format("{} {}, identical", names.size(), plural), c) + "      = " +
         joined_column(labels, g, 0) + "\n" + notes_lines(c);
  }
  return s;
}

std::string header(const std::string& first) {
  return fmt::format("    {:<32} {:<11} {:>9} {:>8} {:>7} {:>7} {:>9} {:>10} {:>9} {:>7} {:>7}\n", first, "verdict", "max|ULP|",
                     "p99.9", "p99", "p50", "mean|ULP|", "max|ppm|", "bound ULP", "ratio", "p-ratio");
}

const char* const kStages[] = {"var_eps", "rsqrt", "scale", "weight", "bias", "accumulation", "output"};

// One path's row of the attribution table: each stage's typical share and largest contribution.
std::string attribution_row(const Path& p) {
  const Attribution& a = p.attribution.value();
  std::string s = fmt::format("    {:<22}", p.name);
  for (const char* st : kStages) {
    std::string cell = "-";
    for (const auto& x : a.stages)
      if (x.stage == st) cell = fmt::format("{:.0f}% {:.2g}", 100 * x.share_mean, x.max_abs_ulp);
    s += fmt::format(" {:>14}", cell);
  }
  return s +
         fmt::format(" {:>14}\n", fmt::format("{:.1g}% {:.2g}", 100 * a.residual_share_mean, a.residual_max_abs_ulp));
}

// The headline fused path's two largest stages (by typical share), as histograms.
std::string headline_stage_histograms(const Path& p) {
  std::vector<const Attribution::Stage*> st;
  for (const auto& x : p.attribution.value().stages)
    if (x.max_abs_ulp > 0) st.push_back(&x);
  std::sort(st.begin(), st.end(), [](const auto* a, const auto* b) { return a->share_mean > b->share_mean; });
  std::string s;
  for (std::size_t k = 0; k < std::min<std::size_t>(2, st.size()); ++k) {
    s += fmt::format("\n  stage histogram: {} / {} (contribution, ULP; --all-histograms for every stage)\n", p.name,
                     st[k]->stage);
    s += histogram_text(st[k]->histogram);
  }
  return s;
}

// Per path: each stage's typical share of an element's squared error, the largest
// contribution, and the residual; then (optionally) per-stage histograms.
std::string attribution_table(const std::vector<Path>& paths, bool histograms, bool headline_histograms) {
  std::string s = fmt::format(
      "  attribution over {} elements: typical share of each element's squared error "
      "(share_mean), and max |contribution| in ULP of the output\n",
      paths[0].attribution.value().elements);
  s += fmt::format("    {:<22}", "path");
  for (const char* st : kStages) s += fmt::format(" {:>14}", st);
  s += fmt::format(" {:>14}\n", "residual");
  for (const auto& p : paths) s += attribution_row(p);
  if (headline_histograms && !histograms && paths.size() > 1) s += headline_stage_histograms(paths[1]);
  if (histograms)
    for (const auto& p : paths)
      for (const auto& x : p.attribution.value().stages) {
        if (x.max_abs_ulp == 0) continue;
        s += fmt::format("\n  stage histogram: {} / {} (contribution, ULP)\n", p.name, x.stage);
        s += histogram_text(x.histogram);
      }
  return s;
}

// Whether any row of the run carries a cancellation note (row_notes.hpp).
bool any_cancellation(const Run& r) {
  for (const auto& d : r.dtypes) {
    for (const auto& o : d.orders)
      for (const auto& p : o.paths)
        if (shows_cancellation(p.scored.facts)) return true;
    for (const auto& f : d.folded_parameters)
      if (f.bias && shows_cancellation(f.bias->facts)) return true;  // weights do not cancel
  }
  return false;
}

std::string shape(const std::vector<std::int64_t>& v) { return fmt::format("[{}]", fmt::join(v, ",")); }

// The case, its layer, the seed and reference, and the legend of the ratio columns.
std::string case_heading(const Run& r) {
  std::string s;
  const Layer& L = r.layer;
  s += fmt::format("foldcheck run {} — {}\n", r.case_path, r.case_name);
  if (!r.case_description.empty()) s += "  " + r.case_description + "\n";
  s += fmt::format(
      "  layer: input {}, {} output channels, kernel {}x{}, stride {}, padding {}, dilation {}, groups {}, "
      "conv bias {}, eps {:g}, BatchNorm {}\n",
      shape(L.input), L.out_channels, L.kernel.at(0), L.kernel.at(1), shape(L.stride), shape(L.padding),
      shape(L.dilation), L.groups, L.conv_bias ? "yes" : "no", L.eps, L.bn_form);
  s += fmt::format(
      "  seed {} · reference: every value certified correctly rounded ({} by the fast path: exact-product sums, "
      "{} of them after a compensated re-sum; {} fast-path fallbacks and every float64 value by {}-bit MPFR "
      "intervals, {} escalations)\n",
      r.seed, r.fast_path_certified, r.fast_path_compensated, r.fast_path_fallbacks, r.precision_bits, r.escalations);
  s += "  ratio = worst |error| / deterministic bound (> 1: UNEXPECTED); bound ULP = that bound, in ULP, at the element of\n"
       "  the worst ratio (not the max-|ULP| element);\n"
       "  p-ratio = worst |error| / probabilistic bound (> 1 within the deterministic bound: SUSPICIOUS)\n";
  if (any_cancellation(r)) s += "  " + std::string(kCancellationNote) + "\n";
  return s;
}

// A dtype's folded weights and biases per recipe (and arithmetic) against the exact fold.
std::string folded_parameters_text(const DtypeResult& d) {
  std::string s = "  folded parameters vs the exact fold\n" + header("recipe");
  std::vector<std::pair<std::string, const Comparison*>> weights, biases;
  for (const auto& w : d.folded_parameters) {
    const std::string ar = w.arithmetic.value_or("default");
    const std::string label = w.recipe + (ar == "default" ? "" : " " + ar);
    weights.emplace_back(label + " weights", &w.weights);
    if (w.bias) biases.emplace_back(label + " bias", &*w.bias);
  }
  return s + scored_rows(weights, "recipes' weights") + scored_rows(biases, "recipes' biases");
}

// The assert_close tolerances the bound implies, for the first two paths (unfused and the
// first fused) of an order whose tolerances the answer does not show (not the dtype's first).
std::string tolerance_lines(const std::vector<Path>& paths) {
  std::string s;
  for (std::size_t i = 0; i < std::min<std::size_t>(2, paths.size()); ++i) {
    const auto& p = paths[i];
    if (!p.tolerance) continue;
    const Tolerance& t = *p.tolerance;
    s += fmt::format(
        "    assert_close tolerance implied by the bound ({}): rtol={:.3g}, atol={:.3g}  (or atol={:.3g} alone)\n",
        p.name, t.rtol, t.atol, t.atol_alone);
  }
  return s;
}

// One fused path against the unfused one (after its name), with the attribution of their
// difference if any.
std::string fused_vs_unfused_lines(const FusedVsUnfused& pr) {
  std::string s = fmt::format(" vs unfused: {} elements differ, max {:.3g} ULP apart, {} beyond the combined bound\n",
                              pr.elements_differing, pr.max_abs_ulp, pr.beyond_combined_bound);
  // Shares of a difference that is zero would split the cancelling contributions (50/50): none.
  const bool differs = pr.elements_differing > 0 && pr.attribution && pr.attribution->difference_rms_ulp > 0;
  if (differs) {
    const auto& fa = *pr.attribution;
    s += fmt::format(
        "      of that difference: fold order {:.0f}%, parameter stages {:.0f}%, residual {:.2g}% "
        "(share of squared ULP; fold order rms {:.3g} ULP)\n",
        100 * fa.fold_order_share, 100 * fa.parameters_share, 100 * fa.residual_share, fa.fold_order_rms_ulp);
  }
  return s;
}

// Each fused path against the unfused one, with the attribution of their difference if any.
std::string fused_vs_unfused_text(const Order& o) {
  // Each pair's lines without its name; pairs with the same lines are printed once, named together.
  std::vector<std::string> keys;
  std::vector<std::vector<std::string>> names;
  for (const auto& pr : o.fused_vs_unfused) {
    keys.push_back(fused_vs_unfused_lines(pr));
    names.push_back({pr.a});
  }
  std::string s;
  for (const auto& g : identical_groups(keys)) s += "    " + joined_column(names, g, 0) + keys[g[0]];
  return s;
}

// The first `count` paths' histograms: the ratio to each element's own bound first (1 is the
// line on every path); the ULP view with --all-histograms (its elements' bounds differ in ULP,
// so it has no single line).
std::string path_histograms(const std::string& dt, const Order& o, std::size_t count, bool all) {
  std::string s;
  for (std::size_t i = 0; i < count; ++i) {
    const auto& p = o.paths[i];
    const std::string what = fmt::format("{} {} {}", dt, o.accumulation, p.name);
    if (p.bound_histogram) {
      s += fmt::format("\n  histogram: {}, error / its bound{}\n", what, all ? "" : " (ULP views: --all-histograms)");
      s += histogram_text(*p.bound_histogram);
    }
    if (all || !p.bound_histogram) {
      s += fmt::format("\n  histogram: {}, error vs the exact value in ULP\n", what);
      s += histogram_text(p.ulp_histogram);
    }
  }
  return s;
}

// One accumulation order's outputs of dtype dt: every path's row, tolerances, fused vs
// unfused, attribution and histograms (the headline ones only for the first order, unless all).
std::string order_text(const std::string& dt, const Order& o, const RunTextOptions& opts, bool first_hist,
                       bool first_order) {
  std::string s = fmt::format("  outputs vs the exact layer ({} accumulation, {} arithmetic)\n", o.accumulation,
                              o.arithmetic.value_or("default"));
  s += header("path");
  const auto& paths = o.paths;
  // paths[0] is the unfused path and paths[1] the first recipe's fused path: the headline pair.
  const std::size_t headline = std::min<std::size_t>(2, paths.size());
  std::vector<std::pair<std::string, const Comparison*>> rows;
  rows.reserve(paths.size());
  for (const auto& p : paths) rows.emplace_back(p.name, &p.scored);
  s += scored_rows(rows, "paths");
  if (!first_order) s += tolerance_lines(paths);  // the first order's are in the answer
  s += fused_vs_unfused_text(o);
  if (!paths.empty() && paths[0].attribution) s += attribution_table(paths, opts.all_histograms, first_hist);
  const std::size_t histograms = opts.all_histograms ? paths.size() : first_hist ? headline : 0;
  return s + path_histograms(dt, o, histograms, opts.all_histograms);
}

// The final verdict line, with what it means.
std::string verdict_line(const Run& r) {
  std::string s = fmt::format("\nverdict: {}", name(r.verdict));
  if (r.verdict == Verdict::Expected)
    s += " — every path, folded parameter and observation is within its rounding-error bound";
  else if (r.verdict == Verdict::Suspicious)
    s += " — within the deterministic bounds, but beyond a probabilistic bound: improbable under random rounding";
  else s += " — see the rows above whose verdict is not EXPECTED";
  return s + seconds_suffix(r.seconds) + "\n";
}

// The answer first: the verdict with its reason, the observed weights, the tolerances.
std::string answer_text(const Run& r) {
  const AnswerLines a = answer_lines(run_answer(r));
  std::string s = "\nanswer: " + a.headline + "\n";
  if (!a.observed.empty()) s += "  " + a.observed + "\n";
  for (const std::string& m : a.more) s += "  " + m + "\n";
  if (!a.tolerances.empty()) s += "  assert_close tolerances implied by the bound:\n";
  for (const std::string& t : a.tolerances) s += "    " + t + "\n";
  return s;
}

// A dtype's heading, folded parameters and orders.
std::string dtype_text(const DtypeResult& d, const RunTextOptions& opts, bool& first_hist) {
  std::string s = fmt::format("\n{} — {} outputs, {} terms per output\n", d.dtype, d.outputs, d.terms_per_output);
  s += folded_parameters_text(d);
  bool first_order = true;
  for (const auto& o : d.orders) {
    s += order_text(d.dtype, o, opts, first_hist, first_order);
    first_hist = first_order = false;
  }
  return s;
}

}  // namespace

std::string run_text(const Run& r, const RunTextOptions& opts) {
  std::string s = case_heading(r) + answer_text(r);
  bool first_hist = true;
  for (const auto& d : r.dtypes) s += dtype_text(d, opts, first_hist);
  if (r.observed_weights) {
    const Explain& ow = *r.observed_weights;
    s += "\nobserved weights";
    if (!ow.note.empty()) s += " (" + ow.note + ")";
    s += ":\n" + explain_view_text(ow);
  }
  return s + verdict_line(r);
}

std::string run_text(const json& r, const RunTextOptions& opts) { return run_text(Run::from_json(r), opts); }

}  // namespace foldcheck::reports
