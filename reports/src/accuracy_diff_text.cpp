// Terminal rendering of `foldcheck accuracy-diff` results.
#include <fmt/format.h>

#include "foldcheck/reports/text.hpp"

namespace foldcheck::reports {

using json = nlohmann::json;

namespace {

std::string ulp_cell(const json& cmp) {
  if (cmp.is_null()) return "-";
  return fmt::format("{:.3g} / {:.3g}", cmp["ulp"]["max_abs"].get<double>(), cmp["ulp"]["p99_9"].get<double>());
}

std::string ratio_cell(const json& r) { return r.is_null() ? "inf" : fmt::format("{:.3g}", r.get<double>()); }

}  // namespace

std::string accuracy_diff_text(const json& r) {
  std::string s;
  const json& m = r["model"];
  s += fmt::format("foldcheck accuracy-diff {} — {} nodes, opset {}{}\n", m["path"].get<std::string>(),
                   m["nodes"].get<std::size_t>(), m["opset"].get<std::int64_t>(),
                   m["producer"].get<std::string>().empty() ? "" : ", from " + m["producer"].get<std::string>());
  const bool observed = r.contains("observed");
  if (observed)
    s += fmt::format("  observed folded model: {}\n  matching: {}\n", r["observed"]["path"].get<std::string>(),
                     r["observed"]["matching"].get<std::string>());
  s += fmt::format("  {} layer -> BatchNormalization pair(s); {} (ULP against the exact fold: max / p99.9; ratio = worst "
                   "distance / the recipe's bound, > 1: UNEXPECTED)\n\n",
                   r["layers"].size(),
                   observed ? "the observed folded weights and biases, with the bounds of the closest recipe"
                            : "each recipe's own folded weights and biases, worst recipe shown");
  s += fmt::format("  {:<28} {:<13} {:<18} {:<11} {:>19} {:>19} {:>8} {:<14} {}\n", "layer", "op", "weight shape",
                   "verdict", "weights |ULP|", "bias |ULP|", "ratio", "recipe", observed ? "worst channel" : "");
  for (const json& l : r["layers"]) {
    std::string shape;
    for (const auto& d : l["weight_shape"]) {
      if (!shape.empty()) shape += 'x';
      shape += std::to_string(d.get<std::int64_t>());
    }
    if (!l.contains("fold")) {
      s += fmt::format("  {:<28} {:<13} {:<18} {:<11} {}\n", l["name"].get<std::string>(), l["op"].get<std::string>(), shape,
                       l["verdict"].get<std::string>(), l.value("observed_note", ""));
      continue;
    }
    const json& f = l["fold"];
    // The recipe shown: observed -> the closest; otherwise the one with the largest ratio.
    const json* shown = &f["recipes"][0];
    for (const json& rc : f["recipes"]) {
      if (observed && rc["recipe"] == f["closest_recipe"]) shown = &rc;
      if (!observed && (rc["worst_ratio"].is_null() ||
                        (!(*shown)["worst_ratio"].is_null() && rc["worst_ratio"].get<double>() > (*shown)["worst_ratio"].get<double>())))
        shown = &rc;
    }
    std::string worst;
    if (observed && !l["worst_channel"].is_null())
      worst = fmt::format("{} ({})", l["worst_channel"].get<std::int64_t>(), (*shown)["worst_in"].get<std::string>());
    s += fmt::format("  {:<28} {:<13} {:<18} {:<11} {:>19} {:>19} {:>8} {:<14} {}\n", l["name"].get<std::string>(),
                     l["op"].get<std::string>(), shape, l["verdict"].get<std::string>(), ulp_cell((*shown)["weights"]),
                     ulp_cell((*shown)["bias"]), ratio_cell((*shown)["worst_ratio"]), (*shown)["recipe"].get<std::string>(),
                     worst);
  }
  if (!r["unpaired"].empty()) {
    s += "\n  BatchNormalization nodes not paired with a layer:\n";
    for (const json& u : r["unpaired"])
      s += fmt::format("    {}: {}\n", u["batchnorm"].get<std::string>(), u["reason"].get<std::string>());
  }
  s += fmt::format("\nverdict: {}  ({:.1f} s)\n", r["verdict"].get<std::string>(), r["seconds"].get<double>());
  return s;
}

}  // namespace foldcheck::reports
