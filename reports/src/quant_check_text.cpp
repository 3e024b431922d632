// Terminal rendering of `foldcheck quant-check`, from its typed view (views/quant_check.hpp).
#include <utility>

#include <fmt/format.h>

#include "foldcheck/reports/model_text.hpp"
#include "foldcheck/reports/text.hpp"
#include "model_text_common.hpp"

namespace foldcheck::reports {

using json = nlohmann::json;
namespace v = result::views;

namespace {

// {"0": 18816, "1": 3} as "0 LSB: 18816, 1 LSB: 3" (no raw JSON in text).
std::string lsb_counts(const nlohmann::json& h) {
  std::string s;
  for (const auto& [k, n] : h.items()) s += fmt::format("{}{} LSB: {}", s.empty() ? "" : ", ", k, n.dump());
  return s.empty() ? std::string("none") : s;
}

std::string layer_text(const v::QuantCheck& q) {
  const v::QuantSpec& sp = q.spec;
  const v::QuantLayerCheck& r = *q.layer;
  std::string s = fmt::format(
      "foldcheck quant-check --case {} — {} fold, int{} {}, {}scales (input {:g}, output {:g}), rounding {}; {} "
      "outputs\n",
      r.case_path, r.fold, sp.bits, sp.per_channel ? "per channel" : "per tensor", sp.pow2 ? "power-of-two " : "",
      r.input_scale, r.output_scale, sp.rounding, r.outputs);
  s += "  output integers against the reference (exact integer arithmetic, exact requantization):\n";
  for (const auto& [p, x] : {std::pair{"integer", &r.integer}, std::pair{"fake_quant", &r.fake_quant}}) {
    s += fmt::format("    {:<11} {} match, {} expected flip(s), {} unexpected; LSB differences {}  -> {}\n", p,
                     x->matches, x->expected_flips, x->unexpected, lsb_counts(x->lsb_histogram), name(x->verdict));
    s += fmt::format("      bound: {}\n", x->bound);
  }
  s += fmt::format("  fake-quant float32 value before output rounding: max |error| {:.3g} LSB\n",
                   r.fake_quant_max_abs_lsb);
  if (r.weights) {
    s += fmt::format("  folded weights, quantized ({} near a tie): flips against the quantized exact fold per recipe:",
                     r.weights->near_tie);
    for (const v::QuantRecipe& rc : r.weights->recipes) s += fmt::format(" {} {}", rc.recipe, rc.flip_count);
    s += "\n";
  }
  s += fmt::format("verdict: {}{}\n", name(q.verdict), seconds_text(q.seconds));
  return s;
}

// A recipe's line: its flips, the first four shown.
std::string recipe_line(const v::QuantRecipe& rc) {
  std::string s = fmt::format("    {:<14} {} flip(s)", rc.recipe, rc.flip_count);
  std::size_t k = 0;
  for (const v::QuantFlip& f : rc.flips) {
    if (k++ == 4) {
      s += " …";
      break;
    }
    s +=
        fmt::format("  [{}] {}→{} (tie {:.2g} steps, {})", f.flat_index, f.expected, f.recipe, f.tie_distance, f.stage);
  }
  return s + "\n";
}

// The dumped integers against the expected ones.
std::string dumped_text(const v::QuantWeightsCheck::Dumped& c) {
  std::string s = fmt::format("  dumped integers: {} match, {} expected flip(s), {} unexpected\n", c.matching,
                              c.expected_flips, c.unexpected);
  if (!c.mismatches.empty())
    s += fmt::format("    {:<18} {:>6} {:>9} {:>14} {:>12}  verdict\n", "index", "found", "expected", "tie distance",
                     "bound");
  for (const v::QuantMismatch& m : c.mismatches)
    s += fmt::format("    {:<18} {:>6} {:>9} {:>14.3g} {:>12.3g}  {}\n", m.index.dump(), m.found, m.expected,
                     m.tie_distance, m.bound_steps, name(m.verdict));
  s += "  (tie distance and bound in steps of the scale: a one-step flip is EXPECTED when the tie lies within the "
       "bound)\n";
  return s;
}

}  // namespace

std::string quant_check_text(const v::QuantCheck& q) {
  if (q.layer) return layer_text(q);
  const v::QuantSpec& sp = q.spec;
  const v::QuantWeightsCheck& r = *q.weights;
  std::string s =
      fmt::format("foldcheck quant-check — {} weights {}, int{} {}, {}{} scales ({}), rounding {}\n", r.elements,
                  r.shape.dump(), sp.bits, sp.per_channel ? "per channel" : "per tensor",
                  sp.pow2 ? "power-of-two " : "",
                  r.scales.size() == 1 ? fmt::format("{:g}", r.scales[0]) : fmt::format("{}", r.scales.size()),
                  r.scale_source, sp.rounding);
  s += fmt::format("  {} weights lie within a correct fold's error bound of a rounding tie\n", r.near_tie);
  s += "  each recipe's float fold, quantized, against the quantized exact fold:\n";
  for (const v::QuantRecipe& rc : r.recipes) s += recipe_line(rc);
  if (r.dumped) s += dumped_text(*r.dumped);
  s += fmt::format("verdict: {}{}\n", name(q.verdict), seconds_text(q.seconds));
  return s;
}

std::string quant_check_text(const json& result) { return quant_check_text(v::QuantCheck::from_json(result)); }

}  // namespace foldcheck::reports
