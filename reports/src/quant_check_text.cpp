// Terminal rendering of `foldcheck quant-check`.
#include <fmt/format.h>

#include "foldcheck/reports/text.hpp"

namespace foldcheck::reports {

using json = nlohmann::json;

namespace {

// {"0": 18816, "1": 3} as "0 LSB: 18816, 1 LSB: 3" (no raw JSON in text).
std::string lsb_counts(const nlohmann::json& h) {
  std::string s;
  for (const auto& [k, v] : h.items()) s += fmt::format("{}{} LSB: {}", s.empty() ? "" : ", ", k, v.dump());
  return s.empty() ? std::string("none") : s;
}

std::string layer_text(const json& r) {
  const json& sp = r["spec"];
  std::string s = fmt::format("foldcheck quant-check --case {} — {} fold, int{} {}, {}scales (input {:g}, output {:g}), rounding {}; {} outputs\n",
                              r["case"]["path"].get<std::string>(), r["fold"].get<std::string>(), sp["bits"].get<int>(),
                              sp["per_channel"].get<bool>() ? "per channel" : "per tensor", sp["pow2"].get<bool>() ? "power-of-two " : "",
                              r["scales"]["input"].get<double>(), r["scales"]["output"].get<double>(), sp["rounding"].get<std::string>(),
                              r["outputs"].get<std::size_t>());
  s += "  output integers against the reference (exact integer arithmetic, exact requantization):\n";
  for (const char* p : {"integer", "fake_quant"}) {
    const json& x = r[p];
    s += fmt::format("    {:<11} {} match, {} expected flip(s), {} unexpected; LSB differences {}  -> {}\n", p,
                     x["matches"].get<std::int64_t>(), x["expected_flips"].get<std::int64_t>(), x["unexpected"].get<std::int64_t>(),
                     lsb_counts(x["lsb_histogram"]), x["verdict"].get<std::string>());
    s += fmt::format("      bound: {}\n", x["bound"].get<std::string>());
  }
  s += fmt::format("  fake-quant float32 value before output rounding: max |error| {:.3g} LSB\n", r["fake_quant_error_lsb"]["max_abs"].get<double>());
  if (r.contains("weights")) {
    s += fmt::format("  folded weights, quantized ({} near a tie): flips against the quantized exact fold per recipe:", r["weights"]["near_tie"].get<std::int64_t>());
    for (const json& rc : r["weights"]["recipes"]) s += fmt::format(" {} {}", rc["recipe"].get<std::string>(), rc["flip_count"].get<std::size_t>());
    s += "\n";
  }
  s += fmt::format("verdict: {}{}\n", r["verdict"].get<std::string>(), seconds_suffix(r));
  return s;
}

}  // namespace

std::string quant_check_text(const json& r) {
  if (r.value("mode", "") == "layer") return layer_text(r);
  const json& sp = r["spec"];
  std::string s = fmt::format("foldcheck quant-check — {} weights {}, int{} {}, {}{} scales ({}), rounding {}\n",
                              r["weights"]["elements"].get<std::size_t>(), r["weights"]["shape"].dump(), sp["bits"].get<int>(),
                              sp["per_channel"].get<bool>() ? "per channel" : "per tensor", sp["pow2"].get<bool>() ? "power-of-two " : "",
                              r["scales"].size() == 1 ? fmt::format("{:g}", r["scales"][0].get<double>()) : fmt::format("{}", r["scales"].size()),
                              r["scale_source"].get<std::string>(), sp["rounding"].get<std::string>());
  s += fmt::format("  {} weights lie within a correct fold's error bound of a rounding tie\n",
                   r["expected_summary"]["near_tie"].get<std::int64_t>());
  s += "  each recipe's float fold, quantized, against the quantized exact fold:\n";
  for (const json& rc : r["recipes"]) {
    s += fmt::format("    {:<14} {} flip(s)", rc["recipe"].get<std::string>(), rc["flip_count"].get<std::size_t>());
    std::size_t k = 0;
    for (const json& f : rc["flips"]) {
      if (k++ == 4) {
        s += " …";
        break;
      }
      s += fmt::format("  [{}] {}→{} (tie {:.2g} steps, {})", f["flat_index"].get<std::size_t>(), f["expected"].get<std::int64_t>(),
                       f["recipe"].get<std::int64_t>(), f["tie_distance"].get<double>(), f["stage"].get<std::string>());
    }
    s += "\n";
  }
  if (r.contains("mismatches")) {
    const json& c = r["mismatch_counts"];
    s += fmt::format("  dumped integers: {} match, {} expected flip(s), {} unexpected\n", c["matching"].get<std::int64_t>(),
                     c["expected_flips"].get<std::int64_t>(), c["unexpected"].get<std::int64_t>());
    if (!r["mismatches"].empty())
      s += fmt::format("    {:<18} {:>6} {:>9} {:>14} {:>12}  verdict\n", "index", "found", "expected", "tie distance", "bound");
    for (const json& m : r["mismatches"])
      s += fmt::format("    {:<18} {:>6} {:>9} {:>14.3g} {:>12.3g}  {}\n", m["index"].dump(), m["found"].get<std::int64_t>(),
                       m["expected"].get<std::int64_t>(), m["tie_distance"].get<double>(), m["bound_steps"].get<double>(),
                       m["verdict"].get<std::string>());
    s += "  (tie distance and bound in steps of the scale: a one-step flip is EXPECTED when the tie lies within the bound)\n";
  }
  s += fmt::format("verdict: {}{}\n", r["verdict"].get<std::string>(), seconds_suffix(r));
  return s;
}

}  // namespace foldcheck::reports
