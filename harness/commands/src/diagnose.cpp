#include "foldcheck/commands/diagnose.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <limits>
#include <tuple>

#include "diagnose_band.hpp"
#include "diagnose_fold.hpp"
#include "diagnose_replay.hpp"
#include "foldcheck/base/envelope.hpp"
#include "foldcheck/base/errors.hpp"
#include "foldcheck/diagnosis/hypotheses.hpp"
#include "foldcheck/io/layer_files.hpp"
#include "foldcheck/layer/fft_bound.hpp"
#include "foldcheck/layer/winograd_bound.hpp"
#include "foldcheck/reports/diagnose_summary.hpp"
#include "foldcheck/result/judgement.hpp"

namespace foldcheck {
namespace {

using namespace diagnosis;

using json = nlohmann::json;

ModelFit fit(const Score& s, const Layer& L, const std::vector<double>& obs, const AffineModel& h) {
  ModelFit f;
  f.expected = s.expected();
  f.vacuous = s.vacuous();
  f.max_ratio = s.max_ratio;
  f.beyond = s.beyond;
  f.nonfinite = s.nonfinite;
  if (s.first_nonfinite >= 0) {
    f.first_nonfinite = static_cast<std::size_t>(s.first_nonfinite);
    f.first_nonfinite_value = obs[*f.first_nonfinite];
  }
  f.max_abs_diff = s.max_abs_diff;
  f.max_abs_ulp = s.max_abs_ulp;
  f.rms_ulp = s.rms_ulp;
  f.p50_ulp = s.p50;
  f.p99_ulp = s.p99;
  if (s.max_ulp_at >= 0) f.max_ulp_element = static_cast<std::size_t>(s.max_ulp_at);
  f.max_ulp_bound = s.max_ulp_bound;
  f.max_ulp_cancellation = s.max_ulp_cancellation;
  f.bound_sum = s.bound_sum;
  if (s.worst >= 0) {
    const std::size_t i = static_cast<std::size_t>(s.worst);
    const std::size_t ch = L.channel(i, h.nhwc);
    f.worst = ModelFit::Worst{i, obs[i], static_cast<double>((L.c[i] - h.m[ch]) * h.a[ch] + h.beta[ch])};
  }
  return f;
}

// An exact output (or conv output) past the dtype's range: the observed value is then an
// infinity, or a finite value no rounding of the exact one gives. Either way the difference
// is overflow, not rounding, and no rounding bound describes it (the ratio to the bound is
// inf or 0/0): nothing was compared, so the verdict is MISTRUSTED, as explain's is for
// folds past the range. Records the first such value in r.
void find_overflow(const Layer& L, const AffineModel& given, DiagnoseResult& r) {
  for (std::size_t i = 0; i < L.c.size(); ++i) {
    const std::size_t ch = L.channel(i, given.nhwc);
    const ld y = (L.c[i] - given.m[ch]) * given.a[ch] + given.beta[ch];
    // The inputs are finite (checked when read), so an exact value that is not finite
    // overflowed the reference's double approximation: past every dtype's range.
    for (const auto& [v, what] : {std::pair{L.c[i], "conv output"}, std::pair{y, "output"}})
      if (!std::isfinite(v) || !std::isfinite(round_to(L.dtype, static_cast<double>(v)))) {
        r.overflow_element = i;
        r.overflow_what = what;
        if (std::isfinite(v)) r.overflow_value = static_cast<double>(v);
        return;
      }
  }
}

// A 16-bit conv layer's non-finite observations where the exact output is finite, every one in
// a channel whose multiplier a = gamma / sqrt(var + eps) rounds to an infinity in the dtype (a
// fold in that arithmetic gives the channel infinite weights): the first such channel, else
// none (a non-finite value elsewhere has another cause).
std::optional<std::pair<std::int64_t, double>> narrow_multiplier(DType t, const Layer& L, const ModelFit& as_given,
                                                                 const AffineModel& given,
                                                                 const std::vector<double>& obs) {
  if ((t != DType::Float16 && t != DType::BFloat16) || !L.has_conv || as_given.nonfinite == 0) return std::nullopt;
  std::optional<std::size_t> first;
  for (std::size_t i = 0; i < obs.size(); ++i) {
    if (std::isfinite(obs[i])) continue;
    const std::size_t ch = L.channel(i, given.nhwc);
    if (!std::isinf(round_to(t, static_cast<double>(given.a[ch])))) return std::nullopt;
    first = first ? std::min(*first, ch) : ch;
  }
  if (!first) return std::nullopt;
  return std::pair{static_cast<std::int64_t>(*first), static_cast<double>(given.a[*first])};
}

// Both shapes as 4-D (N x C becomes N x C x 1 x 1).
std::vector<std::int64_t> as_4d(std::vector<std::int64_t> s) {
  if (s.size() == 2) s = {s[0], s[1], 1, 1};
  return s;
}

// The conv's geometry from the input, weight and observed shapes (io/layer_files.hpp's rule;
// the padding, when not given, the smallest that gives the observed output).
ref::ConvGeometry conv_geometry(const DiagnoseInput& in, const std::vector<std::int64_t>& xs,
                                const std::vector<std::int64_t>& ys) {
  const auto& ws = in.weights->shape;
  if (ws.size() != 4) throw InputError(field("weights") + " must be OIHW (4-D)");
  const std::int64_t given_pad = in.padding.value_or(0);  // checked by the one rule (its range)
  ref::ConvGeometry g = foldcheck::conv_geometry(xs, ws, in.stride, in.dilation, given_pad, given_pad, field("weights"));
  for (std::int64_t p = in.padding ? *in.padding : 0; p <= (in.padding ? *in.padding : std::max(g.KH, g.KW)); ++p) {
    g.pad_top = g.pad_bottom = g.pad_left = g.pad_right = p;
    if (g.OH() == ys[2] && g.OW() == ys[3] && ys[1] == g.O) return g;
  }
  throw InputError(fmt::format(fmt::runtime(field("observed") + " has shape [{}, {}, {}, {}], which no padding gives for this conv "
                               "(stride {}, dilation {}); pass " + field("padding") + "/" + field("stride")),
                               ys[0], ys[1], ys[2], ys[3], in.stride, in.dilation));
}

// The layer's exact conv output (certified reference) and what its bound needs.
Layer conv_layer(const DiagnoseInput& in, const ref::ConvGeometry& g, json& layer) {
  if (!in.conv_bias.empty() && static_cast<std::int64_t>(in.conv_bias.size()) != g.O)
    throw InputError(field("conv_bias") + " must have one value per output channel");
  Layer L;
  L.dtype = in.observed.dtype;
  L.N = g.N;
  ExactConv e = exact_conv(g, in.x.data, in.weights->data, in.conv_bias.empty() ? nullptr : &in.conv_bias, in.ref,
                           L.dtype, in.exact_cache.get());
  L.c = std::move(e.c);
  L.A = std::move(e.A);
  L.bias = in.conv_bias;
  L.has_conv = true;
  L.k = static_cast<double>(g.terms_per_output()) + (in.conv_bias.empty() ? 0 : 1);
  L.C = g.O;
  L.plane = g.OH() * g.OW();
  if (in.bn) add_fold_terms(in, g.terms_per_output(), L);  // a 16-bit output: the fused path's terms
  layer = {{"conv",
            {{"weights", in.weights->shape},
             {"groups", g.groups},
             {"stride", in.stride},
             {"padding", g.pad_top},
             {"dilation", in.dilation},
             {"bias", !in.conv_bias.empty()}}},
           {"batchnorm", in.bn.has_value()}};
  return L;
}

// The layer (conv + BatchNorm, a plain conv, or the BatchNorm alone) checked against the
// observation's shape; g: the conv's geometry (none for a BatchNorm alone).
Layer make_layer(const DiagnoseInput& in, json& layer, std::optional<ref::ConvGeometry>& g) {
  if (!in.weights && !in.bn) throw InputError("a layer needs a conv (" + field("weights") + ") or a BatchNorm");
  if (!in.weights && in.arithmetic.kind != ConvArithmeticKind::Float32)
    throw InputError(field("arithmetic") + " " + in.arithmetic.name() +
                     " describes a conv's products and sums; a BatchNorm alone has none (give " + field("weights") +
                     ")");
  const std::vector<std::int64_t> xs = as_4d(in.x.shape), ys = as_4d(in.observed.shape);
  if (xs.size() != 4) throw InputError(field("x") + " must be NCHW (4-D) or N x C (2-D)");
  if (ys.size() != 4 || ys[0] != xs[0]) throw InputError(field("observed") + " must have the input's batch size and 2 or 4 dimensions");
  Layer L;
  if (in.weights) {
    g = conv_geometry(in, xs, ys);
    L = conv_layer(in, *g, layer);
  } else {
    if (ys != xs) throw InputError(field("observed") + " must have the input's shape when the layer is a BatchNorm alone");
    L.dtype = in.observed.dtype;
    L.N = xs[0];
    L.c.assign(in.x.data.begin(), in.x.data.end());
    L.C = xs[1];
    L.plane = xs[2] * xs[3];
    layer = {{"conv", nullptr}, {"batchnorm", true}};
  }
  layer["input"] = xs;
  layer["output"] = ys;
  if (in.observed.data.size() != L.c.size()) throw InputError(field("observed") + " has the wrong number of elements");
  if (in.bn && static_cast<std::int64_t>(in.bn->gamma.size()) != L.C)
    throw InputError(fmt::format("BatchNorm has {} channels, the layer's output has {}", in.bn->gamma.size(), L.C));
  return L;
}

// One way the layer as given may have been computed: the float32 layer or a replay.
struct Candidate {
  std::string name;
  const Layer* L = nullptr;
  const AffineModel* model = nullptr;
  const Replay* replay = nullptr;  // none: the float32 operands
};

// The candidate that explains the observation best (of those within their bounds, the smallest
// worst ratio; the first in order on a tie), else the closest: its index and score; every
// candidate's fit in fits.
std::pair<std::size_t, Score> best_candidate(const std::vector<Candidate>& cs, const std::vector<double>& obs,
                                             std::vector<ReplayFit>* fits) {
  std::optional<std::pair<std::size_t, Score>> best;
  for (std::size_t i = 0; i < cs.size(); ++i) {
    Score s = score(*cs[i].model, *cs[i].L, obs);
    if (fits) fits->push_back(ReplayFit{cs[i].name, s.expected(), !s.vacuous(), s.max_ratio});
    const bool better = !best || (s.expected() && !best->second.expected()) ||
                        (s.expected() == best->second.expected() && s.max_ratio < best->second.max_ratio);
    if (better) best = std::pair{i, s};
  }
  return *best;
}

std::vector<Candidate> candidates(const std::vector<Replay>& reps, const Layer* f32ops, const AffineModel& given) {
  std::vector<Candidate> cs;
  cs.reserve(reps.size() + 1);
  for (const Replay& r : reps) cs.push_back(Candidate{r.name, &r.L, &r.model, &r});
  if (f32ops) cs.push_back(Candidate{"float32 operands", f32ops, &given, nullptr});
  return cs;
}

// The layer with float32 operands (hardware that kept every bit) summed in a's accumulator;
// none where its gamma_k is undefined (k u_acc >= 1).
std::optional<Layer> float32_operands(const Layer& L, const ConvArithmetic& a) {
  if (a.accumulate_u() * L.k >= 1) return std::nullopt;
  Layer f = L;
  if (a.narrow_accumulator()) set_accumulator(f, a);
  return f;
}

// The hypothesis that the conv ran in arithmetic b (a user's other arithmetic: TF32 tensor
// cores, mixed precision): its name, what it is, and the fix a user can act on.
struct ArithmeticHypothesis {
  const char* name;
  const char* fix;
};
ArithmeticHypothesis arithmetic_hypothesis(ConvArithmeticKind k) {
  switch (k) {
    case ConvArithmeticKind::Float32: break;  // never a hypothesis: every declared arithmetic replays it
    case ConvArithmeticKind::TF32:
      return {"tf32_tensor_cores",
              "computed with TF32 tensor cores (operands rounded to 10 bits): expected on an engine with TF32 enabled "
              "(PyTorch's cuDNN convolutions and TensorFlow enable it by default); to compare in float32 set "
              "torch.backends.cudnn.allow_tf32 = False (and torch.backends.cuda.matmul.allow_tf32 = False) / "
              "tf.config.experimental.enable_tensor_float_32_execution(False)"};
    case ConvArithmeticKind::BF16:
      return {"bf16_operands",
              "computed with bf16 operands and float32 accumulation (mixed precision: torch.autocast with "
              "dtype=torch.bfloat16, oneDNN fpmath_mode bf16, AMX/AVX512-BF16 kernels, cuDNN/cuBLAS fast modes): "
              "expected in that mode; to compare in float32 disable autocast or the bf16 math mode"};
    case ConvArithmeticKind::FP16:
      return {"fp16_operands",
              "computed with fp16 operands and float32 accumulation (torch.autocast with dtype=torch.float16, "
              "TensorRT/cuDNN fp16 modes): expected in that mode; to compare in float32 run without it"};
    case ConvArithmeticKind::FP16Accumulate:
      return {"fp16_accumulation",
              "computed with fp16 operands summed in fp16 (half-precision accumulation, e.g. CUBLAS_COMPUTE_16F or "
              "fp16 kernels that accumulate in half): expected in that mode, its error grows with the number of "
              "terms; accumulate in float32 to compare"};
    case ConvArithmeticKind::BF16x3:
      return {"bf16x3_split",
              "computed with the bf16x3 split-float emulation of float32 (XLA's BF16_BF16_F32_X3, split-float "
              "modes of oneDNN and cuBLAS), about 16 bits per product: expected in that mode"};
  }
  return {"?", ""};
}

// The layer as given with its output stored in b's 16-bit format: its bounds' sum.
double stored_bound(const Layer& L, const AffineModel& given, const std::vector<double>& obs, const ConvArithmetic& b) {
  Layer s = L;
  s.c_store_u = b.storage_format()->u();
  s.c_store_eta = b.storage_format()->eta();
  return fit(score(given, s, obs), s, obs, given).bound_sum;
}

// The arithmetics other than the declared one, each as a hypothesis (its best replay).
void arithmetic_hypotheses(const DiagnoseInput& in, const ref::ConvGeometry& g, const Layer& L,
                           const AffineModel& given, const std::vector<double>& obs, double given_bound,
                           std::vector<ModelFit>& out) {
  for (const ConvArithmetic& b : all_conv_arithmetics()) {
    // float32 is the default's layer as given, and a replay of every other declared arithmetic.
    if (b == in.arithmetic || b.kind == ConvArithmeticKind::Float32) continue;
    const std::vector<Replay> reps = replays(in, g, L, given, b);
    const std::vector<Candidate> cs = candidates(reps, nullptr, given);
    if (cs.empty()) continue;
    const auto [i, sc] = best_candidate(cs, obs, nullptr);
    ModelFit f = fit(sc, *cs[i].L, obs, *cs[i].model);
    const ArithmeticHypothesis h = arithmetic_hypothesis(b.kind);
    f.name = h.name;
    f.description = b.description();
    f.fix = std::string(h.fix) + "; or judge the output with " + field("arithmetic") + " " + b.name();
    f.parameters = {{"arithmetic", b.name()}, {"replay", cs[i].name}};
    // Outputs that are all values of b's 16-bit format were stored in it (torch.autocast): that
    // rounding is observed, not a wider bound, so b's replay with its output stored is loose
    // only against the layer as given stored the same way.
    const bool stored = stored_in_16_bits(b, obs);
    f.loose =
        f.bound_sum > kLooseFactor * (stored && cs[i].L->c_store_u > 0 ? stored_bound(L, given, obs, b) : given_bound);
    // Ties: the output's own 16-bit type first (an fp16 output from fp16 operands), then TF32.
    const bool own = stored || (b.kind == ConvArithmeticKind::FP16 && L.dtype == DType::Float16) ||
                     (b.kind == ConvArithmeticKind::BF16 && L.dtype == DType::BFloat16);
    f.arithmetic_rank = own ? 0 : 1 + static_cast<int>(&b - all_conv_arithmetics().data());
    out.push_back(std::move(f));
  }
}

// The layer's conv computed by Winograd F(m x m, 3 x 3): its bound's W and N in place of
// sum|x w| and k (layer/winograd_bound.hpp; the exact output is the same).
Layer winograd_layer(const DiagnoseInput& in, const ref::ConvGeometry& g, Layer L, int m) {
  const WinogradPoints pts = in.algorithm.onednn_points() ? WinogradPoints::OneDnn : WinogradPoints::Lavin;
  WinogradBound wb = winograd_bound(g, in.x.data, in.weights->data, {}, m, pts);
  L.A = std::move(wb.W);
  L.k = wb.roundings;
  L.fold.clear();  // a 16-bit fused path's terms assume a direct conv
  L.fold_shift.clear();
  return L;
}

// The layer's conv computed by FFT: its normwise bound per output plane in place of the
// accumulation's (layer/fft_bound.hpp; the exact output is the same).
Layer fft_layer(const DiagnoseInput& in, const ref::ConvGeometry& g, Layer L) {
  L.conv_err = fft_bound(g, in.x.data, in.weights->data, in.conv_bias, L.c).E;
  L.k = 0;
  L.fold.clear();  // a 16-bit fused path's terms assume a direct conv
  L.fold_shift.clear();
  return L;
}

// A loose hypothesis of another algorithm (listed, never the best unless its bound is tight).
ModelFit algorithm_fit(const Layer& W, const AffineModel& given, const std::vector<double>& obs, double given_bound,
                       const std::string& algorithm, int rank) {
  ModelFit f = fit(score(given, W, obs), W, obs, given);
  f.parameters = {{"algorithm", algorithm}};
  f.loose = f.bound_sum > kLooseFactor * given_bound;
  f.arithmetic_rank = rank;
  return f;
}

// Under a direct algorithm in float32, each Winograd tile (3 x 3 convs of stride 1) and the
// FFT (stride 1) as hypotheses.
void algorithm_hypotheses(const DiagnoseInput& in, const ref::ConvGeometry& g, const Layer& L, const AffineModel& given,
                          const std::vector<double>& obs, double given_bound, std::vector<ModelFit>& out) {
  if (in.algorithm.kind != ConvAlgorithmKind::Direct || g.stride_h != 1 || g.stride_w != 1 || g.dil_h != 1 ||
      g.dil_w != 1 || in.arithmetic.kind != ConvArithmeticKind::Float32)
    return;
  for (const int m : {2, 4, 6}) {
    if (g.KH != 3 || g.KW != 3) break;
    ModelFit f =
        algorithm_fit(winograd_layer(in, g, L, m), given, obs, given_bound, fmt::format("winograd{}", m), 10 + m);
    f.name = fmt::format("winograd{}_transforms", m);
    f.description = fmt::format(
        "the conv computed by Winograd's F({0}x{0}, 3x3), whose transforms add rounding error "
        "that grows with the tile",
        m);
    f.fix = fmt::format(
        "expected from an engine that picks Winograd F({0}x{0}, 3x3) for 3x3 convs (oneDNN, cuDNN, "
        "XNNPACK); to compare against a direct conv, select a direct algorithm; or judge the output "
        "with {1} winograd{0}",
        m, field("algorithm"));
    out.push_back(std::move(f));
  }
  ModelFit f = algorithm_fit(fft_layer(in, g, L), given, obs, given_bound, "fft", 20);
  // The same exact output under a wider, normwise bound: never evidence for an FFT (a plane of
  // one point, eps = 0, makes it about the direct bound and not loose by the factor).
  f.loose = true;
  f.name = "fft_convolution";
  f.description =
      "the conv computed by FFTs (transformed, multiplied pointwise, transformed back), whose error "
      "spreads over each output plane";
  f.fix = fmt::format(
      "expected from an engine that picks an FFT convolution (cuDNN's FFT algorithms); to compare against a "
      "direct conv, select a direct algorithm (torch.backends.cudnn.deterministic or a fixed cudnn algorithm); "
      "or judge the output with {} fft",
      field("algorithm"));
  out.push_back(std::move(f));
}

// The BatchNorm and bias hypotheses, each scored on every layer a replay gives (the unfused
// replays, the float32 operands, and the general bound for folded outputs, whose converted
// weights the hypotheses' affine models do not replay) and kept where it fits best: which
// replay is closest to the layer as given says nothing when the layer is far off.
// A fit on the general layer (loose: its bound is the general one's) is kept only where no
// replay's fits as well: the first that explains, tight before loose, then the smaller ratio.
void layer_hypotheses(const DiagnoseInput& in, const std::vector<const Layer*>& layers, const Layer* loose,
                      const std::vector<double>& obs, std::vector<ModelFit>& out) {
  std::vector<ModelFit> best;  // one per hypothesis name, in first-seen order (a layer may offer fewer)
  const auto key = [](const ModelFit& f) { return std::tuple{!f.expected, f.expected && f.loose, f.max_ratio}; };
  for (const Layer* L : layers)
    for (const AffineModel& h : hypotheses(in.bn, *L, obs)) {
      ModelFit f = fit(score(h, *L, obs), *L, obs, h);
      f.name = h.name;
      f.description = h.description;
      f.fix = h.fix;
      f.loose = L == loose;
      if (!h.params.empty()) f.parameters = h.params;
      const auto same = std::find_if(best.begin(), best.end(), [&](const ModelFit& b) { return b.name == f.name; });
      if (same == best.end()) best.push_back(std::move(f));
      else if (key(f) < key(*same)) *same = std::move(f);
    }
  for (ModelFit& f : best) out.push_back(std::move(f));
}

// Best first: what explains before what does not; of those that explain, the ones whose bound
// can identify a cause (not loose); then the smaller worst ratio, then the smaller rms. The
// arithmetics that explain all take the smallest worst ratio among them and are ordered by
// their rank (a strict weak order: each fit gets one key).
void rank(std::vector<ModelFit>& fits) {
  double arith = std::numeric_limits<double>::infinity();
  for (const ModelFit& f : fits)
    if (f.expected && !f.loose && f.arithmetic_rank >= 0) arith = std::min(arith, f.max_ratio);
  using Key = std::tuple<bool, bool, double, int, double>;
  const auto key = [&](const ModelFit& f) {
    const bool tied = f.expected && !f.loose && f.arithmetic_rank >= 0;
    return Key{!f.expected, f.expected && f.loose, tied ? arith : f.max_ratio, tied ? f.arithmetic_rank : -1,
               f.rms_ulp};
  };
  std::stable_sort(fits.begin(), fits.end(), [&](const ModelFit& a, const ModelFit& b) { return key(a) < key(b); });
}

// The layer's conv in the declared algorithm (direct and split-K: as computed; Winograd: its bound).
Layer with_algorithm(const DiagnoseInput& in, const std::optional<ref::ConvGeometry>& g, Layer L) {
  if (in.algorithm.kind == ConvAlgorithmKind::Direct) return L;
  if (!g)
    throw InputError(field("algorithm") + " " + in.algorithm.name() +
                     " describes a conv's sums; a BatchNorm alone has none");
  if (const int m = in.algorithm.winograd_tile()) return winograd_layer(in, *g, std::move(L), m);
  if (in.algorithm.kind == ConvAlgorithmKind::FFT) {
    if (in.arithmetic.kind != ConvArithmeticKind::Float32)
      throw InputError(field("algorithm") +
                       " fft is bounded in float32 arithmetic only (FFT convolutions transform "
                       "in float32; " +
                       in.arithmetic.name() + " operands are a tensor-core arithmetic)");
    return fft_layer(in, *g, std::move(L));
  }
  return L;  // split-K: the order-independent gamma_k covers S partial sums added at the end
}

}  // namespace

DiagnoseResult diagnose(const DiagnoseInput& in) {
  DiagnoseResult r;
  std::optional<ref::ConvGeometry> g;
  const Layer L = with_algorithm(in, g, make_layer(in, r.layer, g));
  const std::vector<double>& obs = in.observed.data;
  r.dtype = L.dtype;
  r.channels = L.C;
  r.has_bn = in.bn.has_value();
  r.eps = in.bn ? in.bn->eps : 0.0;
  r.eps_given = in.eps_given;
  r.bn_defaulted = in.bn_defaulted;
  r.arithmetic = in.arithmetic;
  r.algorithm = in.algorithm;
  r.k = L.k;
  r.u = info(info(L.dtype).arithmetic).unit_roundoff;
  r.fused_path = !L.fold.empty();
  const AffineModel given = in.bn ? as_given(*in.bn) : plain_conv(static_cast<std::size_t>(L.C));
  find_overflow(L, given, r);
  const bool declared_f32 = in.arithmetic.kind == ConvArithmeticKind::Float32;
  // Winograd's transforms convert their own operands: only the general bound describes them.
  const bool general_only = only_general_bound(in.arithmetic, in.algorithm);
  const std::vector<Replay> reps =
      declared_f32 || general_only ? std::vector<Replay>{} : replays(in, *g, L, given, in.arithmetic);
  const std::optional<Layer> general = declared_f32 ? std::nullopt : general_bound_layer(in, L, in.arithmetic);
  const std::optional<Layer> f32ops = declared_f32 ? std::nullopt : float32_operands(L, in.arithmetic);
  std::vector<Candidate> cs;
  if (declared_f32) cs = {{"float32", &L, &given, nullptr}};
  else if (general_only && general)
    cs = {{"general bound (Winograd transforms' operands converted)", &*general, &given, nullptr}};
  else if (!general_only) cs = candidates(reps, f32ops ? &*f32ops : nullptr, given);
  if (cs.empty()) {  // no bound in that arithmetic (gamma_k undefined): nothing judged
    r.no_bound = fmt::format(
        "{} has no rounding bound for this layer: its accumulator's gamma_k is undefined for "
        "{} terms (k u >= 1), so nothing was judged",
        in.arithmetic.description(), L.k);
    cs = {{"float32", &L, &given, nullptr}};
  }
  r.general_only = general_only && !r.no_bound;
  const auto [ci, sc] = best_candidate(cs, obs, declared_f32 ? nullptr : &r.replays);
  r.as_given = fit(sc, *cs[ci].L, obs, *cs[ci].model);
  if (!r.overflow_element && sc.first_past >= 0 && cs[ci].L->acc_max > 0) {  // fp16 partial sums
    r.overflow_element = static_cast<std::size_t>(sc.first_past);
    r.overflow_what = "sum of |products| (bounding its fp16 partial sums)";
    r.overflow_value = cs[ci].L->A[*r.overflow_element];
    r.overflow_dtype = "fp16";
  }
  if (!declared_f32) {
    r.replay = cs[ci].name;
    if (general) r.general_ratio = score(given, *general, obs).max_ratio;
  }
  r.narrow_multiplier = narrow_multiplier(L.dtype, L, r.as_given, given, obs);
  r.band = diagnose_band(in, g, L, given, r.overflow_element.has_value());
  std::vector<ModelFit> fits;
  std::vector<const Layer*> hyp_layers;
  for (const Candidate& c : cs)
    if (!c.replay || !c.replay->folded) hyp_layers.push_back(c.L);
  if (general && in.bn) hyp_layers.push_back(&*general);
  layer_hypotheses(in, hyp_layers, general ? &*general : nullptr, obs, fits);
  if (g && !r.as_given.expected && !general_only) {
    arithmetic_hypotheses(in, *g, L, given, obs, r.as_given.bound_sum, fits);
    algorithm_hypotheses(in, *g, L, given, obs, r.as_given.bound_sum, fits);
  }
  rank(fits);
  r.hypotheses = std::move(fits);
  return r;
}

std::vector<double> diagnose_exact_output(const DiagnoseInput& in) {
  json layer;
  std::optional<ref::ConvGeometry> g;
  const Layer L = make_layer(in, layer, g);
  (void)with_algorithm(in, g, L);  // refused here (stride 2 under Winograd, ...), not at the first judgement
  const AffineModel m = in.bn ? as_given(*in.bn) : plain_conv(static_cast<std::size_t>(L.C));
  std::vector<double> y(L.c.size());
  for (std::size_t i = 0; i < y.size(); ++i) {
    const std::size_t ch = L.channel(i, m.nhwc);
    y[i] = static_cast<double>(m.identity ? L.c[i] : (L.c[i] - m.m[ch]) * m.a[ch] + m.beta[ch]);
  }
  return y;
}

// A fit beyond its bound is UNEXPECTED; within it but vacuous (every model value zero),
// MISTRUSTED (judgement::of_check; vacuous implies within).
Verdict ModelFit::verdict() const { return judgement::of_check({.failed = !expected, .informative = !vacuous}); }

std::optional<std::size_t> DiagnoseResult::best() const {
  if (as_given.vacuous || as_given.expected || hypotheses.empty() || !hypotheses.front().expected ||
      hypotheses.front().loose)
    return std::nullopt;
  return 0;
}

// The layer as given. An element that overflowed leaves the bounds without meaning there: no
// evidence either way (MISTRUSTED), whatever the fit.
// The elements judged (score leaves out those past the dtype's range) give the evidence; an
// overflow keeps the whole from passing (not judged there) but does not hide a wrong element
// elsewhere (judgement's order: evidence before doubt).
// No bound in the declared arithmetic: nothing judged (MISTRUSTED). Only the general bound
// (Winograd's transforms with converted operands): a fit within it is no evidence of
// correctness, too wide to see a bug (MISTRUSTED); beyond it is evidence.
Verdict DiagnoseResult::verdict() const {
  judgement::Tally t;
  t.add(judgement::of_check(
      {.failed = !no_bound && !as_given.expected, .informative = !no_bound && !general_only && !as_given.vacuous}));
  if (overflow_element) t.also(Verdict::Mistrusted);
  // The band (diagnose_band.hpp): a statistic, SUSPICIOUS at most.
  if (!band.not_computed) t.add(judgement::of_channels(0, static_cast<std::int64_t>(band.beyond.size())));
  return t.verdict();
}

namespace {

constexpr const char* kFftFormula =
    "; FFT: gamma_k (sum|x w| + |b|) is replaced by one normwise bound per output plane, ||y^ - y||_2 <= "
    "(1 + eps) ||Z^ - Z||_2 / sqrt(n) + eps ||Z^||_2 / sqrt(n) with Z = sum_c F(x_c) (.) F(w_c), eps = t eta / "
    "(1 - t eta) for 2-D FFTs of n = 2^t points (Higham Thm 24.2; radix-2, twiddles within u)";

// The bound's formula (commands/diagnose.hpp states it with its reasoning).
std::string bound_formula(const DiagnoseResult& r) {
  if (!r.has_bn)
    return std::string(
               "|y - c| <= gamma_k(u_acc) (sum|x w| + |b|) + u_s (|y| + ...); c the exact conv output (of the "
               "converted operands under another arithmetic), k its terms, u_acc the accumulator's unit "
               "roundoff") +
           (r.algorithm.winograd_tile() ? "; Winograd F(mxm, 3x3): sum|x w| is W = |A^T| [sum_c (|G||g||G^T|) (.) "
                                          "(|B^T||d||B|)] |A| (times 2 for factored transforms) and k is N = 4n + C + 9"
                                        : "") +
           (r.algorithm.kind == ConvAlgorithmKind::FFT ? kFftFormula : "");
  std::string f =
      "|y - model| <= gamma_{k+8} |a| (sum|x w| + |b|) + gamma_8 (|a|(|c| + |m|) + |beta|) + "
      "u_s (1 + gamma_8)(|a||c| + |a||m| + |beta| + |y|) [+ batch-statistics error]";
  if (r.fused_path)
    f += ", or, for a fold computed and stored in the 16-bit dtype, the larger fused-path bound "
         "e_t |c - b| + e_w sum|x w| + e_b + gamma_{k+1} ((|a| + e_t + e_w) sum|x w| + |b'|) + u_s (|y| + ...) "
         "(e_t: the error of the channel's multiplier gamma / sqrt(var + eps), e_w: each folded weight's own "
         "rounding to the dtype per unit |w|, e_b: the folded bias's; the largest over the fold recipes in "
         "float32 and in the 16-bit arithmetic)";
  if (r.algorithm.winograd_tile())
    f += "; Winograd F(mxm, 3x3): sum|x w| is W = |A^T| [sum_c (|G||g||G^T|) (.) (|B^T||d||B|)] |A| (times 2 for "
         "factored transforms) and k is N = 4n + C + 9 roundings along a path";
  if (r.algorithm.kind == ConvAlgorithmKind::FFT) f += kFftFormula;
  if (r.arithmetic.kind != ConvArithmeticKind::Float32)
    f += "; under another arithmetic c is the exact conv of the converted operands and gamma_k is the "
         "accumulator's (a folded replay: the conv of the converted folded weights plus the weights a fold may "
         "convert otherwise)";
  return f + "; model y = (c - m) a + beta per channel";
}

json arithmetic_json(const DiagnoseResult& r) {
  json j{{"name", r.arithmetic.name()}, {"description", r.arithmetic.description()}, {"algorithm", r.algorithm.name()}};
  if (r.arithmetic.kind == ConvArithmeticKind::Float32) return j;
  json reps = json::array();
  for (const ReplayFit& f : r.replays)
    reps.push_back({{"name", f.name},
                    {"verdict", name(judgement::of_check({.failed = !f.expected, .informative = f.informative}))},
                    {"max_ratio_to_bound", std::isfinite(f.max_ratio) ? json(f.max_ratio) : json("inf")}});
  j["replay"] = r.replay;
  j["replays"] = reps;
  if (r.general_ratio)
    j["general_bound"] = {
        {"formula", "(2e + e^2) sum|x w| + gamma_k(u_acc)(1 + e)^2 sum|x w| on top of the float32 bound, e = 2^(1-p)"},
        {"max_ratio_to_bound", std::isfinite(*r.general_ratio) ? json(*r.general_ratio) : json("inf")}};
  return j;
}

json fit_json(const ModelFit& f) {
  json j{{"verdict", name(f.verdict())},
         {"max_ratio_to_bound", std::isfinite(f.max_ratio) ? json(f.max_ratio) : json("inf")},
         {"elements_beyond_bound", f.beyond},
         {"max_abs_difference", f.max_abs_diff},
         {"nonfinite", f.nonfinite},
         {"residual_ulp", {{"max_abs", f.max_abs_ulp}, {"rms", f.rms_ulp}, {"p50_abs", f.p50_ulp}, {"p99_abs", f.p99_ulp}}}};
  if (f.worst) j["worst_element"] = {{"index", f.worst->index}, {"observed", f.worst->observed}, {"model", f.worst->model}};
  return j;
}

json hypothesis_json(const ModelFit& f) {
  json j = fit_json(f);
  j["name"] = f.name;
  j["description"] = f.description;
  j["fix"] = f.fix;
  if (!f.parameters.is_null()) j["parameters"] = f.parameters;
  if (f.loose) j["loose"] = true;
  return j;
}

// A number, or its name when not finite (a channel holding a NaN output).
json finite_or_name(double v) {
  return std::isfinite(v) ? json(v) : json(std::isnan(v) ? "nan" : v > 0 ? "inf" : "-inf");
}

json band_channel_json(const DiagnoseBand::Channel& c) {
  return {{"channel", c.channel},
          {"rho_ppm", finite_or_name(c.rho_ppm)},
          {"band_ppm", c.band_ppm},
          {"ratio_to_band", finite_or_name(c.ratio)},
          {"honest_rms_ppm", c.honest_rms_ppm},
          {"allowance_ppm", c.allowance_ppm},
          {"outputs", c.outputs}};
}

// The band (diagnose_band.hpp): its statistic, the channels beyond it (the first 16, worst
// first) and its width, which is the detection floor of a one-channel change.
json band_json(const DiagnoseBand& b, std::int64_t channels) {
  if (b.not_computed) return {{"computed", false}, {"not_computed", *b.not_computed}};
  json beyond = json::array();
  for (std::size_t i = 0; i < std::min<std::size_t>(b.beyond.size(), 16); ++i)
    beyond.push_back(band_channel_json(b.beyond[i]));
  return {{"computed", true},
          {"statistic",
           "per output channel, the common relative change rho = sum_i (y_i - y*_i) r_i of its outputs, "
           "r_i = (z_i - mean z) / sum (z_i - mean z)^2, z the exact conv part; band = allowance + s_fold "
           "sqrt(2 ln(2/alpha)) + t_K(1 - alpha/2) rms(rho of K honest computations)"},
          {"samples", b.samples},
          {"alpha_per_channel", b.alpha},
          {"alpha_layer", std::min(1.0, b.alpha * static_cast<double>(channels))},
          {"tested", b.tested},
          {"beyond_count", b.beyond.size()},
          {"beyond", beyond},
          {"worst", b.worst ? band_channel_json(*b.worst) : json(nullptr)},
          {"band_ppm", {{"median", b.band_median_ppm}, {"max", b.band_max_ppm}}}};
}

reports::DiagnoseFacts facts(const DiagnoseResult& r) {
  reports::DiagnoseFacts f;
  if (r.overflow_element)
    f.overflow = reports::DiagnoseOverflow{*r.overflow_element, r.overflow_what, r.overflow_value,
                                           r.overflow_dtype.empty() ? name(r.dtype) : r.overflow_dtype};
  if (r.narrow_multiplier)
    f.narrow_multiplier = reports::NarrowMultiplier{r.narrow_multiplier->first, r.narrow_multiplier->second,
                                                    info(r.dtype).max_finite, name(r.dtype)};
  f.vacuous = r.as_given.vacuous;
  f.expected = r.as_given.expected;
  f.max_ratio = r.as_given.max_ratio;
  if (r.as_given.worst) f.worst_element = r.as_given.worst->index;
  if (r.as_given.first_nonfinite)
    f.nonfinite = std::pair{*r.as_given.first_nonfinite, r.as_given.first_nonfinite_value};
  f.max_abs_ulp = r.as_given.max_abs_ulp;
  if (r.as_given.max_ulp_element)
    f.max_ulp =
        reports::MaxUlpElement{*r.as_given.max_ulp_element, r.as_given.max_ulp_bound, r.as_given.max_ulp_cancellation};
  if (r.algorithm.kind != ConvAlgorithmKind::Direct) f.algorithm = r.algorithm.name();
  f.no_bound = r.no_bound;
  f.general_only = r.general_only;
  if (r.arithmetic.kind != ConvArithmeticKind::Float32) {
    f.arithmetic = r.arithmetic.name();
    f.replay = r.replay;
    f.general_ratio = r.general_ratio;
  }
  if (!r.band.not_computed && r.band.worst)
    f.band = reports::BandFacts{r.band.tested,          static_cast<std::int64_t>(r.band.beyond.size()),
                                r.band.worst->channel,  r.band.worst->rho_ppm,
                                r.band.worst->band_ppm, r.band.band_max_ppm,
                                r.band.alpha,           r.band.samples};
  f.hypotheses = r.hypotheses.size();
  if (!r.hypotheses.empty()) {
    f.closest = r.hypotheses.front().name;
    f.closest_description = r.hypotheses.front().description;
    f.closest_explains = r.hypotheses.front().expected && !r.hypotheses.front().loose;
    f.closest_loose = r.hypotheses.front().expected && r.hypotheses.front().loose;
  }
  return f;
}

}  // namespace

json DiagnoseResult::to_json() const {
  json hj = json::array();
  for (const ModelFit& h : hypotheses) hj.push_back(hypothesis_json(h));
  const std::optional<std::size_t> b = best();
  json out = result_envelope("diagnose");
  out.update(
      json{{"dtype", name(dtype)},
           {"layer", layer},
           {"bn",
            has_bn ? json{{"channels", channels}, {"eps", eps}, {"eps_given", eps_given}, {"defaulted", bn_defaulted}}
                   : json(nullptr)},
           {"bound", {{"kind", "deterministic"}, {"formula", bound_formula(*this)}, {"k", k}, {"u", u}}},
           {"arithmetic", arithmetic_json(*this)},
           {"as_given", fit_json(as_given)},
           {"band", band_json(band, channels)},
           {"verdict", name(verdict())},
           {"best", b ? json(hypotheses[*b].name) : json(nullptr)},
           {"hypotheses", hj},
           {"summary", reports::diagnose_summary(facts(*this))}});
  if (b) out["fix"] = hypotheses[*b].fix;
  return out;
}

void set_diagnose_bn(DiagnoseInput& in, const LoadedBn& bn) {
  std::size_t arrays = 0;
  for (const std::string& d : bn.defaulted)
    for (const char* k : {"gamma ", "beta ", "mean ", "var "})
      if (d.rfind(k, 0) == 0) ++arrays;
  if (in.weights && arrays == 4)
    throw InputError(
        "a BatchNorm with none of gamma, beta, mean, var given (only eps) is a default BatchNorm, not the "
        "layer's: give its parameters, or none for a plain conv");
  in.bn = bn.bn;
  in.eps_given = bn.eps_in_file;
  in.bn_defaulted = bn.defaulted;
}

BnRule diagnose_bn_rule(const DiagnoseInput& in) {
  BnRule rule;
  rule.max_values = static_cast<std::int64_t>(in.x.data.size());
  const bool nc = in.x.shape.size() == 2 || in.x.shape.size() == 4;
  if (in.weights && in.weights->shape.size() == 4) rule.channels = static_cast<std::size_t>(in.weights->shape[0]);
  else if (!in.weights && nc) rule.channels = static_cast<std::size_t>(in.x.shape[1]);
  rule.dtype = in.observed.dtype;
  return rule;
}

}  // namespace foldcheck
