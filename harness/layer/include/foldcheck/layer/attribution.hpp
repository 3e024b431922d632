#pragma once
// Stage attribution: which roundings make up each output's error.
//
// Method (one stage made exact at a time):
//   1. Record: replay the path's output with XNum (xnum.hpp) in float arithmetic, checked
//      bit-identical to evaluate()'s y, noting every operation's local rounding error.
//   2. Replay with stage s exact: every operation is computed exactly on its current
//      operands; those of stage s add no error, all others add their recorded error.
//      Holding the other stages' errors fixed is what isolates s: rounding again would
//      re-draw the accumulation's rounding errors whenever a weight moved by one ULP,
//      burying every stage in noise as large as the accumulation error itself.
//   3. contribution_s = (y^ - y_s) / ulp, with y^ the replay with nothing exact (= y to
//      ~2^-100 relative); total = (y - x) / ulp with x the certified reference; and
//      residual = total - sum of contributions, the interaction of stages (second-order
//      products of rounding errors, e.g. the scale's error times the weights'), so
//      contributions + residual = total for every element (to the rounding of one double
//      subtraction). All in ULPs of the storage dtype at x.
// The replay with every stage exact reproduces x to ~2^-100 relative and the replay with
// none reproduces y: `replay_error_ulp` reports the larger deviation, a check on the
// method itself.
//
// Fold order: for the same elements of the fused and unfused paths, the part of their
// difference (y_f - y_u) / ulp that comes from scaling before rather than after the
// accumulation: (accumulation + output)_fused - (accumulation + output)_unfused. The rest
// is the parameter stages' difference (the fold's var_eps..bias against the BatchNorm's)
// and the residuals' difference; the three sum to the difference.
#include <array>
#include <cstddef>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "foldcheck/layer/evaluate.hpp"
#include "foldcheck/numerics/recipes.hpp"

namespace foldcheck {

struct PathSpec {
  std::optional<Recipe> recipe;  // nullopt: the unfused path (Conv -> BatchNorm)
  Policy policy;
};

struct Attribution {
  std::vector<std::size_t> elements;                       // output indices attributed
  std::vector<double> total, residual;                     // per element, ULP
  std::array<std::vector<double>, kNumStages> contribution;  // per stage, per element (empty: stage absent)
  std::size_t replay_mismatches = 0;                       // replayed y != evaluate()'s y (must be 0)
  double replay_error_ulp = 0;                             // max |all-exact replay - x|, |plain replay - y|, ULP
  double identity_error_ulp = 0;                           // max |total - sum - residual|
};

// unfused: the Conv -> BatchNorm graph in its dtype; x: its input; exact: the reference;
// y: evaluate()'s output of this path (fused paths are folded here with the path's
// recipe and arithmetic, exactly as fold_batchnorm does); elements: indices to attribute.
Attribution attribute(const Graph& unfused, const std::vector<double>& x, const ref::LayerResult& exact,
                      const PathSpec& path, const std::vector<double>& y, const std::vector<std::size_t>& elements,
                      const ref::Options& ref_opts, unsigned threads);

// Which elements to attribute: all if there are at most `limit`, else an even stride
// of the outputs plus the `worst` indices given (deduplicated, sorted).
std::vector<std::size_t> attribution_sample(std::size_t outputs, std::size_t limit,
                                            const std::vector<std::size_t>& worst);

// JSON summary: per stage rms/max/mean ULP, share of the squared error, histogram.
nlohmann::json to_json(const Attribution& a);
// Fold-order decomposition of fused - unfused over the same elements.
nlohmann::json fold_order_json(const Attribution& fused, const Attribution& unfused);

}  // namespace foldcheck
