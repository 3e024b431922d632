#include <fmt/format.h>

#include "foldcheck/reports/text.hpp"

namespace foldcheck::reports {

using json = nlohmann::json;

namespace {
std::string ratio(const json& s) {
  const json& r = s["max_ratio_to_bound"];
  return r.is_string() ? r.get<std::string>() : fmt::format("{:.3g}", r.get<double>());
}
}  // namespace

std::string diagnose_text(const json& r) {
  std::string s = "foldcheck diagnose — ";
  const auto& L = r["layer"];
  s += L["conv"].is_null() ? "BatchNorm alone" : "conv + BatchNorm";
  s += fmt::format(", input {}, output {}, {}\n", L["input"].dump(), L["output"].dump(), r["dtype"].get<std::string>());
  s += "  bound: " + r["bound"]["formula"].get<std::string>() + "\n";
  const auto& g = r["as_given"];
  s += fmt::format("  the layer as given: {} — max |difference| {:.3g}, max {:.4g} ULP (p99 {:.3g}, p50 {:.3g}), worst "
                   "element {}x its bound\n",
                   g["verdict"].get<std::string>(), g["max_abs_difference"].get<double>(), g["residual_ulp"]["max_abs"].get<double>(),
                   g["residual_ulp"]["p99_abs"].get<double>(), g["residual_ulp"]["p50_abs"].get<double>(), ratio(g));
  s += "\n  hypotheses (best first): residual after assuming each, in ULP\n";
  s += fmt::format("    {:<34} {:<11} {:>10} {:>10} {:>10} {:>12}\n", "hypothesis", "verdict", "max|ULP|", "p99", "p50",
                   "x bound");
  for (const auto& h : r["hypotheses"]) {
    s += fmt::format("    {:<34} {:<11} {:>10.4g} {:>10.3g} {:>10.3g} {:>12}\n", h["name"].get<std::string>(),
                     h["verdict"].get<std::string>(), h["residual_ulp"]["max_abs"].get<double>(),
                     h["residual_ulp"]["p99_abs"].get<double>(), h["residual_ulp"]["p50_abs"].get<double>(), ratio(h));
    if (h.contains("parameters") && h["parameters"].contains("eps_recovered"))
      s += fmt::format("      eps recovered: {:g} (estimate {:.6g}; given {:g})\n",
                       h["parameters"]["eps_recovered"].get<double>(), h["parameters"]["eps_estimate"].get<double>(),
                       h["parameters"]["eps_given"].get<double>());
  }
  s += "\nverdict: " + r["verdict"].get<std::string>() + " — " + r["summary"].get<std::string>() + "\n";
  if (r.contains("fix")) s += "fix: " + r["fix"].get<std::string>() + "\n";
  return s;
}

}  // namespace foldcheck::reports
