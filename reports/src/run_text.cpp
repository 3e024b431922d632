#include <algorithm>
#include <fmt/format.h>

#include "foldcheck/reports/row_notes.hpp"
#include "identical_rows.hpp"
#include "foldcheck/reports/run_answer.hpp"
#include "foldcheck/reports/text.hpp"

namespace foldcheck::reports {

using json = nlohmann::json;

namespace {

std::string ratio(const json& scored) {
  if (!scored.contains("bound") || !scored["bound"].contains("worst_ratio")) return "-";
  return fmt::format("{:.3g}", scored["bound"]["worst_ratio"].get<double>());
}

std::string bound_ulp(const json& scored) {
  if (!scored.contains("bound") || !scored["bound"].contains("bound_ulp_at_worst")) return "-";
  return fmt::format("{:.3g}", scored["bound"]["bound_ulp_at_worst"].get<double>());
}

std::string pratio(const json& scored) {
  if (!scored.contains("probabilistic_bound") || scored["probabilistic_bound"]["worst_ratio"].is_null()) return "";
  return fmt::format("{:.3g}", scored["probabilistic_bound"]["worst_ratio"].get<double>());
}

std::string kinds(const json& c) {
  std::string s;
  for (const auto& [k, v] : c["kinds"].items())
    if (v.get<std::int64_t>() > 0 && k != "ppm_undefined") s += fmt::format(" {}={}", k, v.get<std::int64_t>());
  return s;
}

std::string scored_cells(const std::string& label, const json& c) {
  return fmt::format("    {:<32} {:<11} {:>9.4g} {:>8.3g} {:>7.3g} {:>7.3g} {:>9.3g} {:>10.4g} {:>9} {:>7} {:>7}{}\n", label,
                     c["verdict"].get<std::string>(), c["ulp"]["max_abs"].get<double>(), c["ulp"]["p99_9"].get<double>(),
                     c["ulp"]["p99"].get<double>(), c["ulp"]["p50"].get<double>(), c["ulp"]["mean_abs"].get<double>(),
                     c["ppm"]["max_abs"].get<double>(), bound_ulp(c), ratio(c), pratio(c), kinds(c));
}

// A scored comparison's row, then its explanations in place (row_notes.hpp), indented under it.
std::string scored_row(const std::string& label, const json& c) {
  std::string notes;
  for (const std::string& n : row_notes(c)) notes += "      -> " + n + "\n";
  return scored_cells(label, c) + notes;
}

// Rows (label, comparison) with identical numbers printed once (identical_rows.hpp): "3 paths,
// identical" with the names on the next line.
std::string scored_rows(const std::vector<std::pair<std::string, const json*>>& rows, const std::string& plural) {
  std::vector<std::string> keys;
  std::vector<std::vector<std::string>> labels;
  for (const auto& [label, c] : rows) {
    keys.push_back(scored_row("", *c));
    labels.push_back({label});
  }
  std::string s;
  for (const auto& g : identical_groups(keys)) {
    const auto names = distinct_column(labels, g, 0);
    if (names.size() == 1) {
      s += scored_row(names[0], *rows[g[0]].second);
      continue;
    }
    s += scored_cells(fmt::format("{} {}, identical", names.size(), plural), *rows[g[0]].second) + "      = " +
         joined_column(labels, g, 0) + "\n";
    for (const std::string& n : row_notes(*rows[g[0]].second)) s += "      -> " + n + "\n";
  }
  return s;
}


std::string header(const std::string& first) {
  return fmt::format("    {:<32} {:<11} {:>9} {:>8} {:>7} {:>7} {:>9} {:>10} {:>9} {:>7} {:>7}\n", first, "verdict", "max|ULP|",
                     "p99.9", "p99", "p50", "mean|ULP|", "max|ppm|", "bound ULP", "ratio", "p-ratio");
}

const char* const kStages[] = {"var_eps", "rsqrt", "scale", "weight", "bias", "accumulation", "output"};

// Per path: each stage's typical share of an element's squared error, the largest
// contribution, and the residual; then (optionally) per-stage histograms.
std::string attribution_table(const json& paths, bool histograms, bool headline_histograms) {
  const auto& first = paths[0]["attribution"];
  std::string s = fmt::format("  attribution over {} elements: typical share of each element's squared error "
                              "(share_mean), and max |contribution| in ULP of the output\n",
                              first["elements"].get<long>());
  s += fmt::format("    {:<22}", "path");
  for (const char* st : kStages) s += fmt::format(" {:>14}", st);
  s += fmt::format(" {:>14}\n", "residual");
  for (const auto& p : paths) {
    const auto& a = p["attribution"];
    s += fmt::format("    {:<22}", p["name"].get<std::string>());
    for (const char* st : kStages) {
      std::string cell = "-";
      for (const auto& x : a["stages"])
        if (x["stage"] == st)
          cell = fmt::format("{:.0f}% {:.2g}", 100 * x["share_mean"].get<double>(), x["max_abs_ulp"].get<double>());
      s += fmt::format(" {:>14}", cell);
    }
    s += fmt::format(" {:>14}\n", fmt::format("{:.1g}% {:.2g}", 100 * a["residual"]["share_mean"].get<double>(),
                                              a["residual"]["max_abs_ulp"].get<double>()));
  }
  if (headline_histograms && !histograms && paths.size() > 1) {
    // The headline fused path's two largest stages (by typical share).
    const auto& p = paths[1];
    std::vector<const json*> st;
    for (const auto& x : p["attribution"]["stages"])
      if (x["max_abs_ulp"].get<double>() > 0) st.push_back(&x);
    std::sort(st.begin(), st.end(), [](const json* a, const json* b) {
      return (*a)["share_mean"].get<double>() > (*b)["share_mean"].get<double>();
    });
    for (std::size_t k = 0; k < std::min<std::size_t>(2, st.size()); ++k) {
      s += fmt::format("\n  stage histogram: {} / {} (contribution, ULP; --all-histograms for every stage)\n",
                       p["name"].get<std::string>(), (*st[k])["stage"].get<std::string>());
      s += histogram_text((*st[k])["histogram"]);
    }
  }
  if (histograms)
    for (const auto& p : paths)
      for (const auto& x : p["attribution"]["stages"]) {
        if (x["max_abs_ulp"].get<double>() == 0) continue;
        s += fmt::format("\n  stage histogram: {} / {} (contribution, ULP)\n", p["name"].get<std::string>(),
                         x["stage"].get<std::string>());
        s += histogram_text(x["histogram"]);
      }
  return s;
}

// Whether any row of the run carries a cancellation note (row_notes.hpp).
bool any_cancellation(const json& r) {
  for (const auto& d : r["dtypes"]) {
    for (const auto& o : d["orders"])
      for (const auto& p : o["paths"])
        if (shows_cancellation(p)) return true;
    for (const auto& f : d["folded_parameters"])
      if (shows_cancellation(f["bias"])) return true;  // weights do not cancel
  }
  return false;
}

// The case, its layer, the seed and reference, and the legend of the ratio columns.
std::string case_heading(const json& r) {
  std::string s;
  const auto& L = r["layer"];
  s += fmt::format("foldcheck run {} — {}\n", r["case"]["path"].get<std::string>(), r["case"]["name"].get<std::string>());
  if (!r["case"]["description"].get<std::string>().empty()) s += "  " + r["case"]["description"].get<std::string>() + "\n";
  s += fmt::format("  layer: input {}, {} output channels, kernel {}x{}, stride {}, padding {}, dilation {}, groups {}, "
                   "conv bias {}, eps {:g}, BatchNorm {}\n",
                   L["input"].dump(), L["out_channels"].get<int>(), L["kernel"][0].get<int>(), L["kernel"][1].get<int>(),
                   L["stride"].dump(), L["padding"].dump(), L["dilation"].dump(), L["groups"].get<int>(),
                   L["conv_bias"].get<bool>() ? "yes" : "no", L["eps"].get<double>(), L["bn_form"].get<std::string>());
  s += fmt::format("  seed {} · reference: every value certified correctly rounded ({} by the fast path: exact-product sums, "
                   "{} of them after a compensated re-sum; {} fast-path fallbacks and every float64 value by {}-bit MPFR "
                   "intervals, {} escalations)\n",
                   r["seed"].get<std::uint64_t>(), r["reference"].value("fast_path_certified", 0L),
                   r["reference"].value("fast_path_compensated", 0L), r["reference"].value("fast_path_fallbacks", 0L),
                   r["reference"]["precision_bits"].get<long>(),
                   r["reference"]["escalations"].get<long>());
  s += "  ratio = worst |error| / deterministic bound (> 1: UNEXPECTED); bound ULP = that bound, in ULP, at the element of\n"
       "  the worst ratio (not the max-|ULP| element);\n"
       "  p-ratio = worst |error| / probabilistic bound (> 1 within the deterministic bound: SUSPICIOUS)\n";
  if (any_cancellation(r)) s += "  " + std::string(kCancellationNote) + "\n";
  return s;
}

// A dtype's folded weights and biases per recipe (and arithmetic) against the exact fold.
std::string folded_parameters_text(const json& d) {
  std::string s = "  folded parameters vs the exact fold\n" + header("recipe");
  std::vector<std::pair<std::string, const json*>> weights, biases;
  for (const auto& w : d["folded_parameters"]) {
    const std::string ar = w.value("arithmetic", std::string("default"));
    const std::string label = w["recipe"].get<std::string>() + (ar == "default" ? "" : " " + ar);
    weights.emplace_back(label + " weights", &w["weights"]);
    if (!w["bias"].is_null()) biases.emplace_back(label + " bias", &w["bias"]);
  }
  return s + scored_rows(weights, "recipes' weights") + scored_rows(biases, "recipes' biases");
}

// The assert_close tolerances the bound implies, for the first two paths (unfused and the
// first fused) of an order whose tolerances the answer does not show (not the dtype's first).
std::string tolerance_lines(const json& paths) {
  std::string s;
  for (std::size_t i = 0; i < std::min<std::size_t>(2, paths.size()); ++i) {
    const auto& p = paths[i];
    if (!p.contains("tolerance")) continue;
    const auto& t = p["tolerance"];
    s += fmt::format("    assert_close tolerance implied by the bound ({}): rtol={:.3g}, atol={:.3g}  (or atol={:.3g} alone)\n",
                     p["name"].get<std::string>(), t["rtol"].get<double>(), t["atol"].get<double>(),
                     t["atol_alone"].get<double>());
  }
  return s;
}

// One fused path against the unfused one (after its name), with the attribution of their
// difference if any.
std::string fused_vs_unfused_lines(const json& pr) {
  std::string s = fmt::format(" vs unfused: {} elements differ, max {:.3g} ULP apart, {} beyond the combined bound\n",
                     pr["elements_differing"].get<long>(), pr["max_abs_ulp"].get<double>(),
                     pr["beyond_combined_bound"].get<long>());
  // Shares of a difference that is zero would split the cancelling contributions (50/50): none.
  const bool differs = pr["elements_differing"].get<long>() > 0 && pr.contains("attribution") &&
                       pr["attribution"]["difference"].value("rms_ulp", 0.0) > 0;
  if (differs) {
    const auto& fa = pr["attribution"];
    s += fmt::format("      of that difference: fold order {:.0f}%, parameter stages {:.0f}%, residual {:.2g}% "
                     "(share of squared ULP; fold order rms {:.3g} ULP)\n",
                     100 * fa["fold_order"]["share_rms"].get<double>(), 100 * fa["parameters"]["share_rms"].get<double>(),
                     100 * fa["residual"]["share_rms"].get<double>(), fa["fold_order"]["rms_ulp"].get<double>());
  }
  return s;
}

// Each fused path against the unfused one, with the attribution of their difference if any.
std::string fused_vs_unfused_text(const json& o) {
  // Each pair's lines without its name; pairs with the same lines are printed once, named together.
  std::vector<std::string> keys;
  std::vector<std::vector<std::string>> names;
  for (const auto& pr : o["fused_vs_unfused"]) {
    keys.push_back(fused_vs_unfused_lines(pr));
    names.push_back({pr["a"].get<std::string>()});
  }
  std::string s;
  for (const auto& g : identical_groups(keys)) {
    s += "    " + joined_column(names, g, 0) + keys[g[0]];
  }
  return s;
}

// One accumulation order's outputs of dtype dt: every path's row, tolerances, fused vs
// unfused, attribution and histograms (the headline ones only for the first order, unless all).
std::string order_text(const std::string& dt, const json& o, const RunTextOptions& opts, bool first_hist, bool first_order) {
  std::string s = fmt::format("  outputs vs the exact layer ({} accumulation, {} arithmetic)\n", o["accumulation"].get<std::string>(),
                              o.value("arithmetic", std::string("default")));
  s += header("path");
  const auto& paths = o["paths"];
  // paths[0] is the unfused path and paths[1] the first recipe's fused path: the headline pair.
  const std::size_t headline = std::min<std::size_t>(2, paths.size());
  std::vector<std::pair<std::string, const json*>> rows;
  for (const auto& p : paths) rows.emplace_back(p["name"].get<std::string>(), &p);
  s += scored_rows(rows, "paths");
  if (!first_order) s += tolerance_lines(paths);  // the first order's are in the answer
  s += fused_vs_unfused_text(o);
  if (!paths.empty() && paths[0].contains("attribution")) s += attribution_table(paths, opts.all_histograms, first_hist);
  const std::size_t histograms = opts.all_histograms ? paths.size() : first_hist ? headline : 0;
  // The ratio to each element's own bound first (1 is the line on every path); the ULP view
  // with --all-histograms (its elements' bounds differ in ULP, so it has no single line).
  for (std::size_t i = 0; i < histograms; ++i) {
    const auto& p = paths[i];
    const std::string what = fmt::format("{} {} {}", dt, o["accumulation"].get<std::string>(), p["name"].get<std::string>());
    if (p["histograms"].contains("bound")) {
      s += fmt::format("\n  histogram: {}, error / its bound{}\n", what, opts.all_histograms ? "" : " (ULP views: --all-histograms)");
      s += histogram_text(p["histograms"]["bound"]);
    }
    if (opts.all_histograms || !p["histograms"].contains("bound")) {
      s += fmt::format("\n  histogram: {}, error vs the exact value in ULP\n", what);
      s += histogram_text(p["histograms"]["ulp"]);
    }
  }
  return s;
}

// The final verdict line, with what it means.
std::string verdict_line(const json& r) {
  std::string s = fmt::format("\nverdict: {}", r["verdict"].get<std::string>());
  if (r["verdict"] == "EXPECTED") s += " — every path, folded parameter and observation is within its rounding-error bound";
  else if (r["verdict"] == "SUSPICIOUS") s += " — within the deterministic bounds, but beyond a probabilistic bound: improbable under random rounding";
  else s += " — see the rows above whose verdict is not EXPECTED";
  s += seconds_suffix(r) + "\n";
  return s;
}



// The answer first: the verdict with its reason, the observed weights, the tolerances.
std::string answer_text(const json& r) {
  const AnswerLines a = answer_lines(run_answer(r));
  std::string s = "\nanswer: " + a.headline + "\n";
  if (!a.observed.empty()) s += "  " + a.observed + "\n";
  for (const std::string& m : a.more) s += "  " + m + "\n";
  if (!a.tolerances.empty()) s += "  assert_close tolerances implied by the bound:\n";
  for (const std::string& t : a.tolerances) s += "    " + t + "\n";
  return s;
}

}  // namespace

std::string run_text(const json& r, const RunTextOptions& opts) {
  std::string s = case_heading(r) + answer_text(r);
  bool first_hist = true;
  for (const auto& d : r["dtypes"]) {
    const std::string dt = d["dtype"];
    s += fmt::format("\n{} — {} outputs, {} terms per output\n", dt, d["outputs"].get<long>(), d["terms_per_output"].get<long>());
    s += folded_parameters_text(d);
    bool first_order = true;
    for (const auto& o : d["orders"]) {
      s += order_text(dt, o, opts, first_hist, first_order);
      first_hist = first_order = false;
    }
  }
  if (r.contains("observed_weights")) {
    const auto& ow = r["observed_weights"];
    s += "\nobserved weights";
    if (!ow.value("note", std::string()).empty()) s += " (" + ow["note"].get<std::string>() + ")";
    s += ":\n" + explain_text(ow);
  }
  return s + verdict_line(r);
}

}  // namespace foldcheck::reports
