#pragma once
// How one output of an external compiler is judged in `bisect --cmd` (bisect.hpp): the
// drift statistics of a run, the facts about its decisive elements, and whether it is bad.
//
// With the computation known (known_computation.hpp): bad when an element leaves its
// deterministic or probabilistic bound, or is NaN — the internal bisect's criterion.
// With the layer judged by diagnose (a plain conv, another arithmetic or algorithm): bad when
// diagnose's verdict on the output counts against it — its bound, every replay tried.
//
// With only a reference: errors are measured in units that do not shrink with
// cancellation. An element's error in ULPs of its own exact value explodes when that
// value nearly cancels (|y| << sum |x w|) under any re-rounding, while the error itself,
// a sum of roundings of the terms, does not grow; the terms' size is not known here, but
// within one output channel (axis 1 of an N x C x ... reference; the whole tensor when it
// has fewer than 2 axes) they are of one size, and the channel's largest |reference| S_c
// is a lower bound on it that no cancellation shrinks. So each error is counted in
// ulp_T(S_c) ("channel units"). A pass that only re-rounds the same computation leaves the
// channel-unit errors distributed as the all-disabled run's, with at most twice their
// scale (each is a sum of roundings of the same terms; a fold adds at most one rounding
// per term). Two readings of "twice", and a run is bad only beyond both:
//  - the all-disabled run's max m0: max above 2 m0 + 1 (one unit more: the rounding of the
//    output itself, which does not scale);
//  - its rms s0 over its N scored elements, as the scale of mean-zero errors (the model
//    of output_bound.hpp): with the scale at most 2 sigma, sigma <= sqrt(c) s0 except with
//    probability (1 - confidence) / 2 (chi-square with N degrees, Chernoff), and N errors
//    stay below lambda times their scale except with the same probability
//    (lambda = sqrt(2 ln(4 N / (1 - confidence)))): max above 2 lambda sqrt(c) s0 + 1.
//    Small outputs need this: 25 errors have a max far from their scale (a lucky baseline
//    of 0.9 units, an honest reordering at 3.4).
// With N >= 1000 also the p99.9 (below that it is the max): above 2 q0 + 1. Or a NaN or an
// infinity, or an error as large as the tensor's largest |reference| (not an
// approximation at all: zeros, another layout; this judges the all-disabled run too). A
// pass that changes the computation's value (an approximation, a wrong constant) moves
// the errors by the change's relative size times S_c / ulp(S_c), thousands of units for a
// 12-bit estimate. --threshold-ulp N replaces this (and the bounds) by max |ULP| > N; a NaN
// or an infinity stays bad.
#include <cmath>
#include <cstdint>
#include <string>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "foldcheck/commands/bisect.hpp"
#include "foldcheck/commands/diagnose.hpp"
#include "foldcheck/model/known_computation.hpp"
#include "foldcheck/numerics/compare.hpp"

namespace foldcheck {

// The channel unit ulp_T(S_c) of every element (see above).
class ChannelUnits {
 public:
  ChannelUnits(const ref::ValueArray& exact, const Shape& shape, DType t);
  std::size_t channel(std::size_t i) const { return shape_.size() < 2 ? 0 : (i / inner_) % static_cast<std::size_t>(shape_[1]); }
  double scale(std::size_t i) const { return scale_[channel(i)]; }
  double unit(std::size_t i) const { return unit_[channel(i)]; }
  double largest() const { return largest_; }  // the largest |reference| of the whole tensor

 private:
  Shape shape_;
  std::size_t inner_ = 1;
  std::vector<double> scale_, unit_;
  double largest_ = 0;
};

// The channel-unit errors of one output: max, p99.9, the element of the max.
struct ScaledErrors {
  double max = 0, p999 = 0, rms = 0;
  std::int64_t worst = -1, count = 0;
};
ScaledErrors scaled_errors(const std::vector<double>& v, const ref::ValueArray& exact, const ChannelUnits& u);

// One run's output judged: its statistics into step.measures (a RunMeasures), bad / verdict / informative
// into its typed fields; returns whether it is bad.
class OutputJudge {
 public:
  // known: the bounds (then `exact` is known->exact); else `exact` is the reference.
  // layer: judged by diagnose instead (ExternalBisectOptions::layer; `exact` its exact output).
  OutputJudge(ref::ValueArray exact, Shape shape, DType t, const KnownComputation* known,
              std::optional<double> threshold_ulp, const DiagnoseInput* layer = nullptr);

  // The all-disabled run: sets the reference criterion's m0 and q0. Call it first.
  bool judge_base(const std::vector<double>& v, BisectStep& step);
  bool judge(const std::vector<double>& v, BisectStep& step);
  std::string criterion() const;
  // The type the next output is compared in by diagnose (the layer form; default: the layer's).
  void set_observed_dtype(DType t) { observed_dtype_ = t; }

 private:
  bool judge_impl(const std::vector<double>& v, BisectStep& step, bool base);
  bool judge_by_diagnose(const std::vector<double>& v, BisectStep& step, std::int64_t& decisive) const;
  void set_limits(const ScaledErrors& baseline);
  static constexpr double kConfidence = 0.999;
  BisectElement element(std::size_t i, const std::vector<double>& v) const;

  ref::ValueArray exact_;
  Shape shape_;
  DType t_;
  const KnownComputation* known_;
  std::optional<double> threshold_;
  const DiagnoseInput* layer_;
  std::optional<DType> observed_dtype_;
  ChannelUnits units_;
  double max_limit_ = 0, p999_limit_ = HUGE_VAL;  // the reference criterion's, from the baseline
  std::string limits_;                             // how they were set, for criterion()
};

}  // namespace foldcheck
