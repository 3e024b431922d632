// diagnose's fused path for a 16-bit output (diagnose_fold.hpp).
#include "diagnose_fold.hpp"

#include <algorithm>
#include <cmath>

#include "foldcheck/layer/fold_pass.hpp"

namespace foldcheck {
namespace {

using diagnosis::FoldTerms;

// The larger of two channels' terms, term by term (each bounds its own quantity for the
// recipe it came from, so the maximum bounds it for whichever recipe made the fold).
void widen_to(FoldTerms& t, const FoldTerms& o) {
  t.scale_err = std::max(t.scale_err, o.scale_err);
  t.weight_err = std::max(t.weight_err, o.weight_err);
  t.weight_eta = std::max(t.weight_eta, o.weight_eta);
  t.bias_err = std::max(t.bias_err, o.bias_err);
  t.bias_mag = std::max(t.bias_mag, o.bias_mag);
  t.shift_err = std::max(t.shift_err, o.shift_err);
  t.shift_mag = std::max(t.shift_mag, o.shift_mag);
}

// One recipe's terms for channel o (FoldInfo: |w' - w t| <= alpha |w| + eta, of which
// scale.e is the shared multiplier's error tau and the rest, alpha - scale.e, the weight's
// own rounding; the stored bias and the separate shift as Bounded).
FoldTerms recipe_terms(const FoldInfo& fi, std::size_t o) {
  FoldTerms t;
  t.scale_err = fi.scale[o].e;
  t.weight_err = std::max(0.0, round_up(fi.weight_alpha[o] - fi.scale[o].e));
  t.weight_eta = fi.weight_eta;
  t.bias_err = fi.bias[o].e;
  t.bias_mag = round_up(fi.bias[o].mag() + fi.bias[o].e);
  if (fi.has_post_add) {
    t.shift_err = fi.post_add[o].e;
    t.shift_mag = round_up(fi.post_add[o].mag() + fi.post_add[o].e);
  }
  return t;
}

// The channel's weights that may be stored subnormal: nonzero with |w a| < 2 * min normal,
// or all nonzero ones when the weight's error bound exceeds |a| / 2 (then |w t_hat| may be
// anything below |w| (|a| + alpha)). The factor 2 covers |w t_hat| <= |w| (|a| + alpha) <= 2 |w a|.
double small_weights(const std::vector<double>& w, std::int64_t per_channel, std::size_t o, const FoldTerms& t,
                     DType dtype) {
  const double min_normal = std::ldexp(1.0, info(dtype).emin);
  const bool all = t.scale_err + t.weight_err > t.a / 2;
  double n = 0;
  for (std::int64_t j = 0; j < per_channel; ++j) {
    const double v = w[o * static_cast<std::size_t>(per_channel) + static_cast<std::size_t>(j)];
    if (v != 0 && (all || std::fabs(v) * t.a < 2 * min_normal)) ++n;
  }
  return n;
}

}  // namespace

// Every recipe in every arithmetic an observed fold of this dtype may have used
// (observed_fold_arithmetics: float32, and the 16-bit type itself as PyTorch's fusers compute
// on a .half() or .bfloat16() module; Bounded's rsqrt counts the sqrt and the division, so
// both of torch.rsqrt's kernels are covered), as the fold checks score them. The exact fold
// (one rounding of each value to the dtype: scale error 0, weight u_s |t|, bias u_s |b'| +
// eta_s) is left out: each of its terms is at most the float32 recipes' (which round to
// the dtype after their float32 chain), and its certified fold of every weight is the
// costliest of all.
void add_fold_terms(const DiagnoseInput& in, std::int64_t per_channel, diagnosis::Layer& L) {
  if (info(L.dtype).arithmetic == L.dtype || !in.weights) return;
  const std::vector<double>& w = in.weights->data;
  const diagnosis::AffineModel given = diagnosis::as_given(*in.bn);
  const std::size_t C = static_cast<std::size_t>(L.C);
  std::vector<FoldTerms> one(C), shift(C);
  bool any_shift = false;
  for (const std::optional<DType> fa : observed_fold_arithmetics(L.dtype))
    for (const Recipe r : all_recipes()) {
      if (r == Recipe::Exact) continue;  // within the float32 recipes' terms (above)
      Arithmetic ar;
      ar.fold_dtype = fa;
      FoldedParams fp;
      try {
        fp = fold_parameters(w, per_channel, in.conv_bias, *in.bn, L.dtype, r, in.ref, ar);
      } catch (const UnboundedFold&) {  // no bound in that arithmetic: no fused path of that kind
        continue;
      }
      any_shift = any_shift || fp.info.has_post_add;
      for (std::size_t o = 0; o < C; ++o) widen_to(fp.info.has_post_add ? shift[o] : one[o], recipe_terms(fp.info, o));
    }
  for (std::size_t o = 0; o < C; ++o)
    for (FoldTerms* t : {&one[o], &shift[o]}) {
      const double b = in.conv_bias.empty() ? 0.0 : in.conv_bias[o];
      t->a = static_cast<double>(std::fabs(given.a[o]));
      t->bias_given = static_cast<double>(std::fabs(given.a[o]) *
                                              (std::fabs(static_cast<diagnosis::ld>(b)) + std::fabs(given.m[o])) +
                                          std::fabs(given.beta[o]));
      t->small_weights = small_weights(w, per_channel, o, *t, L.dtype);
    }
  L.fold = std::move(one);
  if (any_shift) L.fold_shift = std::move(shift);
  for (const double v : in.x.data) L.x_max = std::max(L.x_max, std::fabs(v));
}

}  // namespace foldcheck
