#include <algorithm>
#include <cstdlib>
#include <fmt/format.h>
#include <string>
#include <vector>

#include "foldcheck/reports/text.hpp"

namespace foldcheck::reports {

using json = nlohmann::json;
using result::views::Explain;
using result::views::ExplainElement;

namespace {
// The exact fold for a person: 17 significant digits (enough to tell any two binary64 values
// apart, far more than the compared dtype's ULP needs) in %g form, so the exponent is always
// shown, at every magnitude; the JSON keeps the 21-digit string. Parsed as long double (64-bit
// significand), so the 17 digits are those of the 21-digit value, correctly rounded.
std::string exact_text(const ExplainElement& e) {
  return fmt::format("{:.17g}", std::strtold(e.exact_folded_digits.c_str(), nullptr));
}

// An element's label: its flat index, or its own weight index [o,c,kh,kw] when the producer
// knows the tensor's shape (run's observed weights).
std::string label_of(const ExplainElement& e) {
  if (!e.weight_index) return std::to_string(e.index);
  std::string label = "[";
  for (const std::int64_t v : *e.weight_index) label.append(label.size() > 1 ? "," : "").append(std::to_string(v));
  label.push_back(']');
  return label;
}

// The first 40 elements, one row each, under their header.
std::string elements_table(const std::vector<ExplainElement>& el) {
  const std::size_t show = std::min<std::size_t>(el.size(), 40);
  std::vector<std::string> labels;
  std::size_t width = 5;
  for (std::size_t i = 0; i < show; ++i) {
    labels.push_back(label_of(el[i]));
    width = std::max(width, labels.back().size());
  }
  std::string s = fmt::format("{:>{}} {:>4} {:>15} {:>15} {:>11} {:>26} {:>10} {:>9}\n", "index", width, "ch",
                              "original", "observed", "drift ppm", "exact fold", "resid ULP", "bound ULP");
  for (std::size_t i = 0; i < show; ++i) {
    const auto& e = el[i];
    s +=
        fmt::format("{:>{}} {:>4} {:>15.9g} {:>15.9g} {:>11} {:>26} {:>+10.3f} {:>9.3g}\n", labels[i], width, e.channel,
                    e.original, e.observed, e.drift_ppm ? fmt::format("{:+.4f}", *e.drift_ppm) : std::string("-"),
                    exact_text(e), e.residual_ulp, e.bound_ulp);
  }
  if (el.size() > show) s += fmt::format("  ... {} more elements (see --format json)\n", el.size() - show);
  return s;
}

std::string recipes_text(const Explain& j) {
  std::string s = "\nrecipes (bit-exact replay, a-priori bound):\n";
  std::size_t name_width = 14;  // "onnxoptimizer (bfloat16 arithmetic)" is wider
  for (const auto& r : j.recipes) name_width = std::max(name_width, r.name.size());
  for (const auto& r : j.recipes)
    s += fmt::format("  {:<{}} {:<10} bound {:>6.3g} ULP  {}\n", r.name, name_width,
                     r.bit_exact ? "BIT-EXACT" : fmt::format("{} differ", r.mismatches), r.bound_ulp_max,
                     r.explains ? "explains it" : "does not explain it");
  return s;
}

}  // namespace

std::string explain_view_text(const Explain& j) {
  // eps once: a source that states it is not followed by it again
  std::string s =
      fmt::format("foldcheck explain — {} weights, BatchNorm from {}{}\n\n", j.dtype, j.bn_source,
                  j.bn_source.find("eps ") == std::string::npos ? fmt::format(" (eps {:g})", j.bn_eps) : "");
  s += elements_table(j.elements);
  const std::size_t listed = j.elements.size(), total = j.elements_total;
  if (total > listed)
    s += fmt::format(
        "  ({} of {} elements are listed: those farthest from the exact fold for their bound; the "
        "recipes, histogram and verdict below cover all {})\n",
        listed, total, total);
  s += recipes_text(j);
  s += "\nresiduals vs the exact fold:\n" + histogram_text(j.residuals_ulp);
  if (j.scale_inference) s += "\ninferred: " + *j.scale_inference + "\n";
  s += std::string("\nverdict: ") + name(j.verdict) + "\n";
  for (const auto& r : j.reasoning) s += "  " + r + "\n";
  return s;
}

std::string explain_text(const json& j) { return explain_view_text(Explain::from_json(j)); }

}  // namespace foldcheck::reports
