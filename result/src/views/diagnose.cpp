// Reading a `diagnose` result into its view (views/diagnose.hpp).
#include "foldcheck/result/views/diagnose.hpp"

#include "foldcheck/result/views/json_io.hpp"

namespace foldcheck::result::views {

using json = nlohmann::json;

DiagnoseRatio DiagnoseRatio::from_json(const json& j) {
  if (j.is_string()) return {std::nullopt, j.get<std::string>()};
  return {j.get<double>(), ""};
}

DiagnoseFit DiagnoseFit::from_json(const json& j) {
  const json& u = j.at("residual_ulp");
  return {required_verdict(j, "verdict"), required<double>(u, "max_abs"), required<double>(u, "p99_abs"),
          required<double>(u, "p50_abs"), DiagnoseRatio::from_json(j.at("max_ratio_to_bound"))};
}

DiagnoseHypothesis DiagnoseHypothesis::from_json(const json& j) {
  DiagnoseHypothesis h{required<std::string>(j, "name"), DiagnoseFit::from_json(j), std::nullopt};
  const json* p = object_at(j, "parameters");
  if (p && p->contains("eps_recovered"))
    h.eps = DiagnoseEps{required<double>(*p, "eps_recovered"), required<double>(*p, "eps_estimate"),
                        required<double>(*p, "eps_given")};
  return h;
}

DiagnoseBandChannel DiagnoseBandChannel::from_json(const json& j) {
  return DiagnoseBandChannel{required_count(j, "channel"), DiagnoseRatio::from_json(j.at("rho_ppm")),
                             DiagnoseRatio::from_json(j.at("ratio_to_band")), required<double>(j, "band_ppm"),
                             required<double>(j, "honest_rms_ppm")};
}

DiagnoseBandView DiagnoseBandView::from_json(const json& j) {
  DiagnoseBandView b;
  if (!required<bool>(j, "computed")) {
    b.not_computed = required<std::string>(j, "not_computed");
    return b;
  }
  b.samples = required_count<std::size_t>(j, "samples");
  b.alpha = required<double>(j, "alpha_per_channel");
  b.tested = required_count(j, "tested");
  b.beyond_count = required_count(j, "beyond_count");
  b.beyond = list_of(j, "beyond", DiagnoseBandChannel::from_json);
  if (const json* w = object_at(j, "worst")) b.worst = DiagnoseBandChannel::from_json(*w);
  b.median_ppm = required<double>(j.at("band_ppm"), "median");
  b.max_ppm = required<double>(j.at("band_ppm"), "max");
  return b;
}

Diagnose Diagnose::from_json(const json& j) {
  const json& layer = j.at("layer");
  Diagnose d;
  d.has_conv = !layer.at("conv").is_null();
  d.has_bn = optional<bool>(layer, "batchnorm").value_or(true);  // reports before plain convs always had one
  if (const json* bn = object_at(j, "bn"))
    if (const auto it = bn->find("defaulted"); it != bn->end() && it->is_array())
      for (const json& v : *it)
        if (v.is_string()) d.bn_defaulted.push_back(v.get<std::string>());
  if (const json* a = object_at(j, "arithmetic")) {
    d.arithmetic = optional<std::string>(*a, "name").value_or("float32");
    d.replay = optional<std::string>(*a, "replay").value_or("");
    d.algorithm = optional<std::string>(*a, "algorithm").value_or("direct");
    if (const auto it = a->find("replays"); it != a->end() && it->is_array())
      for (const json& r : *it)
        d.replays.push_back(DiagnoseReplay{required<std::string>(r, "name"), required_verdict(r, "verdict"),
                                           DiagnoseRatio::from_json(r.at("max_ratio_to_bound"))});
  }
  d.input_shape = layer.at("input");
  d.output_shape = layer.at("output");
  d.dtype = required<std::string>(j, "dtype");
  d.bound_formula = required<std::string>(j.at("bound"), "formula");
  d.max_abs_difference = required<double>(j.at("as_given"), "max_abs_difference");
  d.as_given = DiagnoseFit::from_json(j.at("as_given"));
  d.hypotheses = list_of(j, "hypotheses", DiagnoseHypothesis::from_json);
  if (const json* b = object_at(j, "band")) d.band = DiagnoseBandView::from_json(*b);
  d.verdict = required_verdict(j, "verdict");
  d.summary = required<std::string>(j, "summary");
  d.fix = optional<std::string>(j, "fix");
  return d;
}

}  // namespace foldcheck::result::views
