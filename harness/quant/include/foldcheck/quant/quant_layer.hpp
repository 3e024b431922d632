#pragma once
// A quantized conv+BN layer's outputs along three paths, in LSBs of the output scale:
//
//   reference   the integers exactly: acc = sum q_w q_x + q_b (int64, exact), y = acc s_x s_w
//               (a double-double), quantized exactly with the output scale s_y;
//   integer     int32 accumulation (exact) and requantization by the float32 multiplier
//               M = fl32(s_x s_w / s_y), acc * M formed exactly and rounded once: with
//               power-of-two scales M is exact and the path equals the reference;
//   fake-quant  float32: the conv of the dequantized input and weights (q s, exact in float32)
//               plus the dequantized bias, sequential accumulation, then quantized with s_y.
//
// The layer: the case's float32 weights folded by `fold` (the engine recipe of a run-time
// fold, as Graffitist does), weights quantized per tensor or per channel, the input per
// tensor, the bias to int32 with scale s_x s_w (the usual convention), s_y from max |y|.
//
// A path's integer differing from the reference is an EXPECTED flip when it differs by one
// step and the reference value lies within the path's rounding bound of the tie between
// them: fake-quant gamma_{n+1} (sum |x^ w^| + |b^|) (Higham 3.1, the float32 conv);
// integer |acc| |M - M_exact| (M's one rounding). Otherwise UNEXPECTED.
#include <cstdint>

#include <nlohmann/json.hpp>

#include "foldcheck/io/case_file.hpp"
#include "foldcheck/numerics/compare.hpp"
#include "foldcheck/numerics/quantize.hpp"
#include "foldcheck/numerics/recipes.hpp"
#include "foldcheck/quant/quant_check.hpp"

namespace foldcheck {

// One path's integers against the reference's (in LSBs of the output scale).
struct QuantPathCounts {
  std::int64_t matches = 0, expected_flips = 0, unexpected = 0;
};

// The result of `quant-check --case` (schema "quant-check", "mode": "layer").
struct QuantLayerResult {
  nlohmann::json detail;         // case, fold, spec, scales, outputs, both paths, fake-quant error histogram
  QuantPathCounts fake_quant, integer;
  std::int64_t informative = 0;  // outputs whose exact quantized value is not 0
  QuantCheckResult weights;      // every recipe's folded weights quantized against the exact fold's integers
  // UNEXPECTED when a path has an unexpected integer; MISTRUSTED when every exact quantized
  // output is 0 (any scale or fold would have matched).
  Verdict verdict() const;
  nlohmann::json to_json() const;
};

QuantLayerResult quantized_layer(const CaseSpec& spec, const QuantSpec& q, Recipe fold, const ref::Options& opts);

}  // namespace foldcheck
