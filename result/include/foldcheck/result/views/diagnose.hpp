#pragma once
// The typed view of a `diagnose` result (reports/schema: command "diagnose"), restored once
// from its JSON for the renderers (reports/src/diagnose_text.cpp).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "foldcheck/result/verdict.hpp"

namespace foldcheck::result::views {

// A fit's worst element against its bound ("max_ratio_to_bound"): a number, or a text the
// command wrote instead (an infinite or undefined ratio), kept as written.
struct DiagnoseRatio {
  std::optional<double> value;  // the ratio when a number
  std::string text;             // the stored text when not a number
  static DiagnoseRatio from_json(const nlohmann::json& j);
};

// The layer as given or one hypothesis: its verdict (the command's judgement, restored), the
// residual after assuming it, in ULP, and its worst ratio. Required: "verdict",
// "residual_ulp" {"max_abs", "p99_abs", "p50_abs"}, "max_ratio_to_bound".
struct DiagnoseFit {
  Verdict verdict = Verdict::Mistrusted;
  double max_abs_ulp = 0, p99_abs_ulp = 0, p50_abs_ulp = 0;
  DiagnoseRatio ratio;
  static DiagnoseFit from_json(const nlohmann::json& j);
};

// The epsilon a hypothesis recovered ("parameters": {"eps_recovered", "eps_estimate",
// "eps_given"}): only the hypotheses that fit an epsilon have one.
struct DiagnoseEps {
  double recovered = 0, estimate = 0, given = 0;
};

struct DiagnoseHypothesis {
  std::string name;  // required
  DiagnoseFit fit;
  std::optional<DiagnoseEps> eps;  // absent unless parameters.eps_recovered
  static DiagnoseHypothesis from_json(const nlohmann::json& j);
};

// One replay of the layer in the declared arithmetic ("arithmetic": {"replays": [...]}).
struct DiagnoseReplay {
  std::string name;
  Verdict verdict = Verdict::Mistrusted;
  DiagnoseRatio ratio;
};

// The calibrated band ("band", commands/diagnose.hpp's DiagnoseBand): computed or why not, its
// worst channel and the channels beyond it (rho and band in ppm; ratio as written).
struct DiagnoseBandChannel {
  std::int64_t channel = 0;
  DiagnoseRatio rho_ppm, ratio;
  double band_ppm = 0, honest_rms_ppm = 0;
  static DiagnoseBandChannel from_json(const nlohmann::json& j);
};
struct DiagnoseBandView {
  std::optional<std::string> not_computed;  // absent when computed
  std::size_t samples = 0;
  double alpha = 0, median_ppm = 0, max_ppm = 0;
  std::int64_t tested = 0, beyond_count = 0;
  std::vector<DiagnoseBandChannel> beyond;
  std::optional<DiagnoseBandChannel> worst;
  static DiagnoseBandView from_json(const nlohmann::json& j);
};

// The whole result. Required: "layer" {"conv" (null: BatchNorm alone), "input", "output"
// (shapes, kept as JSON: printed as the result wrote them)}, "dtype", "bound" {"formula"},
// "as_given", "hypotheses", "verdict", "summary". Optional: "fix" (only when a hypothesis
// explains the observation), "layer" {"batchnorm"} (absent: true), "arithmetic" {"name",
// "replay", "replays"} (absent: float32), "band" (absent: a result written before it).
struct Diagnose {
  bool has_conv = false, has_bn = true;
  std::string arithmetic = "float32", replay, algorithm = "direct";
  std::vector<DiagnoseReplay> replays;
  std::vector<std::string> bn_defaulted;  // "bn": {"defaulted"}: BatchNorm parameters given nowhere
  nlohmann::json input_shape, output_shape;
  std::string dtype, bound_formula;
  double max_abs_difference = 0;  // as_given's
  DiagnoseFit as_given;
  std::vector<DiagnoseHypothesis> hypotheses;
  std::optional<DiagnoseBandView> band;
  Verdict verdict = Verdict::Mistrusted;
  std::string summary;
  std::optional<std::string> fix;
  static Diagnose from_json(const nlohmann::json& j);
};

}  // namespace foldcheck::result::views
