// Judging one external compiler output (output_judge.hpp).
#include "output_judge.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "foldcheck/model/output_bound.hpp"
#include "foldcheck/reports/bisect_notes.hpp"
#include "output_band_json.hpp"

namespace foldcheck {

using json = nlohmann::json;

ChannelUnits::ChannelUnits(const ref::ValueArray& exact, const Shape& shape, DType t) : shape_(shape) {
  std::size_t channels = 1;
  if (shape_.size() >= 2) {
    channels = static_cast<std::size_t>(std::max<std::int64_t>(shape_[1], 1));
    for (std::size_t a = 2; a < shape_.size(); ++a)
      inner_ *= static_cast<std::size_t>(std::max<std::int64_t>(shape_[a], 1));
  }
  scale_.assign(channels, 0.0);
  for (std::size_t i = 0; i < exact.size(); ++i) {
    const double x = std::fabs(exact.approx(i).hi);
    if (std::isfinite(x)) scale_[channel(i)] = std::max(scale_[channel(i)], x);
  }
  for (const double c : scale_) largest_ = std::max(largest_, c);
  unit_.resize(channels);
  // ulp_T of the scale (of T's smallest subnormal spacing for a channel of zeros: every
  // error then counts in the finest unit T has).
  for (std::size_t c = 0; c < channels; ++c) unit_[c] = ulp(t, scale_[c]);
}

ScaledErrors scaled_errors(const std::vector<double>& v, const ref::ValueArray& exact, const ChannelUnits& u) {
  ScaledErrors r;
  std::vector<double> e;
  e.reserve(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (std::isnan(v[i])) continue;  // counted as NaN by the comparison, and bad
    const ref::DoubleDouble x = exact.approx(i);
    const double d = std::isinf(v[i]) ? HUGE_VAL : std::fabs((v[i] - x.hi) - x.lo) / u.unit(i);
    e.push_back(d);
    r.rms += d * d;
    if (r.worst < 0 || d > r.max) {
      r.max = d;
      r.worst = static_cast<std::int64_t>(i);
    }
  }
  r.count = static_cast<std::int64_t>(e.size());
  if (!e.empty()) {
    r.rms = std::sqrt(r.rms / static_cast<double>(e.size()));
    // The nearest-rank p99.9, as compare.hpp's distributions.
    const std::size_t k = static_cast<std::size_t>(std::ceil(0.999 * static_cast<double>(e.size()))) - 1;
    std::nth_element(e.begin(), e.begin() + static_cast<std::ptrdiff_t>(k), e.end());
    r.p999 = e[k];
  }
  return r;
}

OutputJudge::OutputJudge(ref::ValueArray exact, Shape shape, DType t, const KnownComputation* known,
                         std::optional<double> threshold_ulp, const DiagnoseInput* layer)
    : exact_(std::move(exact)),
      shape_(std::move(shape)),
      t_(t),
      known_(known),
      threshold_(threshold_ulp),
      layer_(layer),
      units_(exact_, shape_, t) {}

// diagnose's verdict on the output (its worst element decisive); a deterministic bound, so
// the probabilistic figures repeat it.
bool OutputJudge::judge_by_diagnose(const std::vector<double>& v, BisectStep& step, std::int64_t& decisive) const {
  DiagnoseInput in = *layer_;
  in.observed.data = v;
  if (observed_dtype_) in.observed.dtype = *observed_dtype_;
  const DiagnoseResult r = diagnose(in);
  step.verdict = r.verdict();
  const ModelFit& f = r.as_given;
  std::get<RunMeasures>(step.measures).bounds = RunMeasures::Bounds{f.max_ratio, f.max_ratio, f.beyond, f.beyond};
  if (f.worst) decisive = static_cast<std::int64_t>(f.worst->index);
  return judgement::counts_against(*step.verdict);
}

bool OutputJudge::judge_base(const std::vector<double>& v, BisectStep& step) { return judge_impl(v, step, true); }
bool OutputJudge::judge(const std::vector<double>& v, BisectStep& step) { return judge_impl(v, step, false); }

std::string OutputJudge::criterion() const {
  if (threshold_) return reports::threshold_criterion(*threshold_);
  if (layer_)
    return fmt::format(
        "diagnose's verdict on the layer{} in {}{}: an element beyond its bound (every replay of the "
        "arithmetic's operand conversions tried), a channel whose outputs share a common factor beyond the band "
        "of honest computations (float32, SUSPICIOUS), or a NaN or an infinity",
        layer_->bn ? "" : " (a conv without BatchNorm)", layer_->arithmetic.description(),
        layer_->algorithm.kind == ConvAlgorithmKind::Direct ? "" : ", algorithm " + layer_->algorithm.name());
  if (known_)
    return fmt::format("an element beyond its bound{}, {}or a NaN or an infinity; bounds: {}",
                       known_->deterministic ? " (deterministic or probabilistic)" : "",
                       known_->band ? "the output beyond the band of honest float32 runs along a layer's channel or a "
                                      "BatchNorm's eps (SUSPICIOUS), "
                                    : "",
                       known_->formula);
  return "errors in channel units (ULP of the channel's largest |reference|, which cancellation does not shrink), "
         "against twice what the all-disabled run shows, plus one unit: " +
         limits_ + "; or a NaN or an infinity, or an error as large as the largest |reference| (in any run)";
}

// What a reader needs to see whether an element's error is alarming: its exact value
// beside its channel's scale (and, known, sum |x w| and its bound).
BisectElement OutputJudge::element(std::size_t i, const std::vector<double>& v) const {
  const ref::DoubleDouble x = exact_.approx(i);
  BisectElement e{.flat_index = i,
                  .index = unravel_index(shape_, i),
                  .observed = v[i],
                  .exact = x.hi,
                  .channel = units_.channel(i),
                  .channel_scale = units_.scale(i)};
  if (std::isfinite(v[i])) {
    e.ulp = ulp_error(v[i], x, t_);
    e.channel_units = static_cast<double>(distance(v[i], x)) / units_.unit(i);
  }
  if (known_ && !known_->abs_sum.empty()) e.abs_sum = known_->abs_sum[i];
  if (known_ && !known_->bound.empty() && std::isfinite(v[i])) {
    e.bound = known_->bound[i];
    e.ratio = bound_ratio(distance(v[i], x), known_->bound[i]);
    e.probabilistic_bound = known_->probabilistic[i];
  }
  return e;
}

void OutputJudge::set_limits(const ScaledErrors& s) {
  const double by_max = 2 * s.max + 1;
  max_limit_ = by_max;
  limits_ = fmt::format("max above 2 x {:.4g} + 1 = {:.4g}", s.max, by_max);
  if (s.count >= 2) {
    // lambda over the N errors of a run, sqrt(c) for the one scale estimated from N errors.
    double lambda = 0, inflation = 0, unused = 0;
    output_bound_factors(static_cast<double>(s.count), static_cast<std::size_t>(s.count), kConfidence, lambda, unused);
    output_bound_factors(1, static_cast<std::size_t>(s.count), kConfidence, unused, inflation);
    const double by_rms = 2 * lambda * inflation * s.rms + 1;
    if (by_rms > by_max) {
      max_limit_ = by_rms;
      limits_ = fmt::format(
          "max above 2 x {:.4g} x {:.4g} x {:.4g} + 1 = {:.4g} (lambda, sqrt(c) and the rms of its {} "
          "errors: at confidence {:g}, larger than 2 x its max {:.4g} + 1)",
          lambda, inflation, s.rms, by_rms, s.count, kConfidence, s.max);
    }
  }
  if (s.count >= 1000) {
    p999_limit_ = 2 * s.p999 + 1;
    limits_ += fmt::format(", or p99.9 above 2 x {:.4g} + 1 = {:.4g}", s.p999, p999_limit_);
  }
}

bool OutputJudge::judge_impl(const std::vector<double>& v, BisectStep& step, bool base) {
  RunMeasures& j = std::get<RunMeasures>(step.measures);
  const std::vector<double>* det = known_ && !known_->bound.empty() ? &known_->bound : nullptr;
  const std::vector<double>* prob = known_ ? &known_->probabilistic : nullptr;
  const Comparison c = compare(v, exact_, t_, det, det ? prob : nullptr);
  const ScaledErrors s = scaled_errors(v, exact_, units_);
  j.max_abs_ulp = c.ulp.max_abs;
  j.p99_9_abs_ulp = c.ulp.p999;
  j.p50_abs_ulp = c.ulp.p50;
  j.rms_ulp = c.ulp.rms;
  j.nan = c.kinds.nan;
  j.inf = c.kinds.inf_mismatch;
  j.worst_index = c.worst_index;
  j.units_max = s.max;
  j.units_p99_9 = s.p999;
  j.units_rms = s.rms;
  // No informative element (every exact value 0, or rounding to 0 or to an infinity in T):
  // this run compared nothing, whatever its errors.
  step.informative = c.verdict != Verdict::Mistrusted;
  step.lists_informative = true;
  if (c.worst_index >= 0) j.largest_ulp = element(static_cast<std::size_t>(c.worst_index), v);
  // A NaN or an infinity (the reference is finite) is bad under every criterion.
  bool bad = c.kinds.nan > 0 || c.kinds.inf_mismatch > 0;
  std::int64_t decisive = -1;
  if (threshold_) {
    bad = bad || c.ulp.max_abs > *threshold_;
    decisive = c.worst_index;
    if (known_) j.bounds_verdict = c.verdict;  // for the reader; the threshold decides
    step.verdict = bad ? Verdict::Unexpected : Verdict::Expected;
  } else if (layer_) {
    bad = judge_by_diagnose(v, step, decisive) || bad;
  } else if (known_) {
    step.verdict = c.verdict;
    j.bounds = RunMeasures::Bounds{c.worst_bound_ratio.value_or(0), c.worst_probabilistic_ratio.value_or(0),
                                   c.beyond_bound, c.beyond_probabilistic};
    decisive = c.worst_bound_index;
    // A MISTRUSTED comparison (no informative output) is no evidence against a pass. A finite
    // output of a float32 model (every value finite) is also held to its band: beyond it,
    // SUSPICIOUS and bad.
    if (known_->band && std::ranges::all_of(v, [](double x) { return std::isfinite(x); })) {
      j.band = known_->band(v);
      step.verdict = with_band(c.verdict, *j.band);
    }
    bad = bad || judgement::counts_against(*step.verdict);
  } else {
    // Not an approximation of the reference at all, in any run (the all-disabled one too,
    // which the limits cannot judge): an error as large as the largest |reference| of the
    // whole tensor (zeros, another layout, another input), and more than T's spacing there
    // (a value below T's range rounds away whole). Rounding moves an output by far less
    // than the largest value it is computed beside.
    const double floor = std::max(units_.largest(), ulp(t_, units_.largest()) * (1 + 0x1p-10));
    std::int64_t gross = 0;
    for (std::size_t i = 0; i < v.size(); ++i)
      gross +=
          std::isfinite(v[i]) && units_.largest() > 0 && static_cast<double>(distance(v[i], exact_.approx(i))) >= floor;
    j.gross = gross;
    if (base) set_limits(s);
    decisive = s.worst;
    bad = bad || gross > 0 || s.max > max_limit_ || s.p999 > p999_limit_;
  }
  // The element that decides: the first NaN or infinity (it has no finite error), else the
  // criterion's worst (closest to its bound; largest in channel units; largest |ULP|).
  for (std::size_t i = 0; i < v.size(); ++i)
    if (!std::isfinite(v[i])) {
      decisive = static_cast<std::int64_t>(i);
      break;
    }
  if (decisive >= 0) j.decisive = element(static_cast<std::size_t>(decisive), v);
  step.bad = bad;
  return bad;
}

}  // namespace foldcheck
