#include <algorithm>
#include <cstdlib>
#include <fmt/format.h>
#include <string>
#include <vector>

#include "foldcheck/reports/text.hpp"

namespace foldcheck::reports {

using json = nlohmann::json;

namespace {
// The exact fold for a person: 17 significant digits (enough to tell any two binary64 values
// apart, far more than the compared dtype's ULP needs) in %g form, so the exponent is always
// shown, at every magnitude; the JSON keeps the 21-digit string. Parsed as long double (64-bit
// significand), so the 17 digits are those of the 21-digit value, correctly rounded.
std::string exact_text(const json& e) {
  const auto& digits = e["exact_folded_digits"].get_ref<const std::string&>();
  return fmt::format("{:.17g}", std::strtold(digits.c_str(), nullptr));
}
}  // namespace

std::string explain_text(const json& j) {
  std::string s;
  const std::string source = j["bn"]["source"];  // eps once: a source that states it is not followed by it again
  s += fmt::format("foldcheck explain — {} weights, BatchNorm from {}{}\n\n", j["dtype"].get<std::string>(), source,
                   source.find("eps ") == std::string::npos ? fmt::format(" (eps {:g})", j["bn"]["eps"].get<double>()) : "");
  const auto& el = j["elements"];
  const std::size_t show = std::min<std::size_t>(el.size(), 40);
  // Each element's label: its flat index, or its own weight index [o,c,kh,kw] when the
  // producer knows the tensor's shape (run's observed weights).
  std::vector<std::string> labels;
  std::size_t width = 5;
  for (std::size_t i = 0; i < show; ++i) {
    const auto& e = el[i];
    std::string label = std::to_string(e["index"].get<std::int64_t>());
    if (e.contains("weight_index")) {
      label = "[";
      for (const auto& v : e["weight_index"]) label.append(label.size() > 1 ? "," : "").append(std::to_string(v.get<std::int64_t>()));
      label.push_back(']');
    }
    width = std::max(width, label.size());
    labels.push_back(std::move(label));
  }
  s += fmt::format("{:>{}} {:>4} {:>15} {:>15} {:>11} {:>26} {:>10} {:>9}\n", "index", width, "ch", "original",
                   "observed", "drift ppm", "exact fold", "resid ULP", "bound ULP");
  for (std::size_t i = 0; i < show; ++i) {
    const auto& e = el[i];
    s += fmt::format("{:>{}} {:>4} {:>15.9g} {:>15.9g} {:>11} {:>26} {:>+10.3f} {:>9.3g}\n", labels[i], width,
                     e["channel"].get<int>(), e["original"].get<double>(), e["observed"].get<double>(),
                     e["drift_ppm"].is_null() ? std::string("-") : fmt::format("{:+.4f}", e["drift_ppm"].get<double>()),
                     exact_text(e), e["residual_ulp"].get<double>(),
                     e["bound_ulp"].get<double>());
  }
  if (el.size() > show) s += fmt::format("  ... {} more elements (see --format json)\n", el.size() - show);
  const std::size_t total = j.value("elements_total", el.size());
  if (total > el.size())
    s += fmt::format("  ({} of {} elements are listed: those farthest from the exact fold for their bound; the "
                     "recipes, histogram and verdict below cover all {})\n",
                     el.size(), total, total);
  s += "\nrecipes (bit-exact replay, a-priori bound):\n";
  std::size_t name_width = 14;  // "onnxoptimizer (bfloat16 arithmetic)" is wider
  for (const auto& r : j["recipes"]) name_width = std::max(name_width, r["name"].get_ref<const std::string&>().size());
  for (const auto& r : j["recipes"])
    s += fmt::format("  {:<{}} {:<10} bound {:>6.3g} ULP  {}\n", r["name"].get<std::string>(), name_width,
                     r["bit_exact"].get<bool>() ? "BIT-EXACT" : fmt::format("{} differ", r["mismatches"].get<int>()),
                     r["bound_ulp_max"].get<double>(), r["explains"].get<bool>() ? "explains it" : "does not explain it");
  s += "\nresiduals vs the exact fold:\n" + histogram_text(j["summary"]["histograms"]["ulp"]);
  if (j.contains("scale_inference")) s += "\ninferred: " + j["scale_inference"]["summary"].get<std::string>() + "\n";
  s += "\nverdict: " + j["verdict"].get<std::string>() + "\n";
  for (const auto& r : j["reasoning"]) s += "  " + r.get<std::string>() + "\n";
  return s;
}

}  // namespace foldcheck::reports
