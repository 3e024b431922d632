// The bounds of a known computation for external bisect (known_computation.hpp).
#include "foldcheck/model/known_computation.hpp"

#include <algorithm>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "foldcheck/base/errors.hpp"
#include "foldcheck/layer/evaluate.hpp"
#include "foldcheck/layer/fold_pass.hpp"
#include "foldcheck/layer/passes.hpp"
#include "foldcheck/model/model_patterns.hpp"
#include "foldcheck/model/model_run.hpp"
#include "foldcheck/model/output_bound.hpp"
#include "foldcheck/numerics/compare.hpp"

namespace foldcheck {

namespace {

// The arithmetics a correct compiler may use for the same operations: contracted
// multiply-adds, and a multiply by 1/sqrt (correctly rounded) in place of a division.
std::vector<Arithmetic> ieee_arithmetics() {
  std::vector<Arithmetic> r;
  for (const bool fma : {false, true})
    for (const bool rsqrt_multiply : {false, true}) {
      Arithmetic a;
      a.fma = fma;
      a.rsqrt_multiply = rsqrt_multiply;
      r.push_back(a);
    }
  return r;
}

// The lowerings of the layer under one arithmetic, as graph and policy: the BatchNorm
// kept (both forms), folded by every recipe, and TVM's fold with its shift fused into the
// conv bias (FuseOps; differs from the fold only with a conv bias).
std::vector<std::pair<Graph, Policy>> lowerings(const Graph& layer, const Arithmetic& ar, const ref::Options& ref) {
  std::vector<std::pair<Graph, Policy>> r;
  Policy p;  // sequential order: the largest k of every order (see the header)
  p.arith = ar;
  p.threads = ref.threads;
  for (const BnForm f : {BnForm::Textbook, BnForm::ScaleShift}) {
    p.bn_form = f;
    r.emplace_back(layer, p);
  }
  p.bn_form = BnForm::ScaleShift;
  // Every recipe in the model's arithmetic, and for a 16-bit layer also computed in its own
  // type (PyTorch's fusers on a .half() or .bfloat16() module round each fold operation to
  // it: observed_fold_arithmetics), whose bound counts those roundings at the type's u.
  for (const std::optional<DType> fa : observed_fold_arithmetics(layer.dtype))
    for (const Recipe rc : all_recipes()) {
      if (fa && rc == Recipe::Exact) continue;  // the exact fold has no arithmetic
      Arithmetic fold_ar = ar;
      fold_ar.fold_dtype = fa;
      r.emplace_back(fold_batchnorm(layer, rc, ref, fold_ar), p);
    }
  if (!layer.nodes[0].bias.empty()) {
    Lowering l;
    l.scale_shift = l.folded = l.fuse_epilogue = true;
    l.rsqrt_multiply = ar.rsqrt_multiply;
    Realized z = realize(l, layer, {}, ref, true);
    z.policy.arith = ar;
    z.policy.threads = ref.threads;
    r.emplace_back(std::move(z.graph), z.policy);
  }
  return r;
}

}  // namespace

std::string layer_size(const Graph& layer) {
  const ref::ConvGeometry& g = layer.nodes.at(0).geometry;
  const double outputs =
      static_cast<double>(g.N) * static_cast<double>(g.O) * static_cast<double>(g.OH()) * static_cast<double>(g.OW());
  return fmt::format("{:.0f} outputs x {} terms: {:.3g} multiply-adds", outputs, g.terms_per_output(),
                     outputs * static_cast<double>(g.terms_per_output()));
}

KnownComputation layer_computation(const Graph& layer, const std::vector<double>& x, double confidence,
                                   const ref::Options& ref) {
  if (layer.nodes.size() != 2 || layer.nodes[0].kind != Node::Kind::Conv ||
      layer.nodes[1].kind != Node::Kind::BatchNorm)
    throw InputError("bisect: the known computation must be one Conv -> BatchNorm layer");
  const Node& c = layer.nodes[0];
  ref::Options ro = ref;
  ro.formats = ref::format_bit(*info(layer.dtype).format);
  ro.bound_data = true;
  const ref::LayerData d{c.geometry, &x, &c.weight.data, c.bias.empty() ? nullptr : &c.bias, &layer.nodes[1].bn};
  const ref::LayerResult exact = ref::conv_bn(d, ro);
  KnownComputation k;
  k.exact = exact.y;
  k.shape = {c.geometry.N, c.geometry.O, c.geometry.OH(), c.geometry.OW()};
  k.dtype = layer.dtype;
  k.abs_sum = exact.abs_sum;
  const std::size_t n = exact.y.size();
  k.bound.assign(n, 0.0);
  k.probabilistic.assign(n, 0.0);
  std::size_t count = 0;
  for (const Arithmetic& ar : ieee_arithmetics())
    for (const auto& [g, p] : lowerings(layer, ar, ro)) {
      const BoundReport br = error_bounds(g, exact, p, confidence, &x);
      for (std::size_t i = 0; i < n; ++i) {
        k.bound[i] = std::max(k.bound[i], br.bound[i]);
        k.probabilistic[i] = std::max(k.probabilistic[i], br.probabilistic[i]);
      }
      ++count;
    }
  k.formula = fmt::format(
      "per element, the largest bound of {} correct lowerings in {} with IEEE operations (the BatchNorm kept in either "
      "form, or folded by the PyTorch, TVM, ONNX Runtime, onnxoptimizer or exact recipe; with or without FMA and "
      "1/sqrt-multiply; any summation order): deterministic gamma_k sum|x w|, and probabilistic (Higham & Mary) at "
      "confidence {:g}{}",
      count, name(layer.dtype), confidence,
      info(layer.dtype).arithmetic != layer.dtype
          ? fmt::format("; {} values with every operation in {}, the fold's also in {} (an engine that accumulates "
                        "in {} is outside these bounds)",
                        name(layer.dtype), name(info(layer.dtype).arithmetic), name(layer.dtype), name(layer.dtype))
          : std::string());
  return k;
}

namespace {

// The pair of a model that is that pair and nothing else (Identity between them allowed):
// the model's input feeds the layer, the BatchNorm writes the model's output.
const BnPair* whole_model_pair(const Model& m, const BnPatterns& pat) {
  if (pat.pairs.size() != 1) return nullptr;
  const BnPair& p = pat.pairs[0];
  if (p.op == "ConvTranspose" || m.nodes.size() != 2 + p.through.size()) return nullptr;
  const ModelNode& layer = m.nodes[p.layer];
  const ModelNode& bn = m.nodes[p.bn];
  if (layer.inputs.empty() || layer.inputs[0] != m.inputs[0].name) return nullptr;
  if (bn.outputs.empty() || bn.outputs[0] != m.outputs[0].name) return nullptr;
  return &p;
}

// The band of the model's output on x (reference: the float64 run's), calibrated once, on the
// first output judged (none with --threshold-ulp); the closure owns what the calibration points
// into (output_band.hpp: the model and its pairs outlive it).
std::function<OutputBand(const std::vector<double>&)> model_band(const Model& m, const Tensor& x,
                                                                 const Tensor& reference,
                                                                 const ModelComputationOptions& o) {
  struct State {
    Model m;
    BnPatterns pairs;
    Tensor x, reference;
    OutputBandOptions o;
    std::optional<BandCalibration> cal;
  };
  auto st = std::make_shared<State>();
  st->m = m;
  st->pairs = find_bn_pairs(st->m);
  st->x = x;
  st->reference = reference;
  st->o.seed = o.seed;
  st->o.threads = o.ref.threads;
  st->o.progress = o.progress;
  return [st](const std::vector<double>& y) {
    if (!st->cal) st->cal = calibrate_band(st->m, st->pairs, st->x, st->reference, st->o);
    return judge_band(*st->cal, st->m, st->pairs, st->x, st->reference, y, st->o);
  };
}

}  // namespace

KnownComputation model_computation(const Model& m, const std::string& path, const std::string& input,
                                   const ModelComputationOptions& o) {
  if (m.inputs.size() != 1 || m.outputs.size() != 1)
    throw InputError(fmt::format(fmt::runtime("{}: " + field("model") +
                                              " needs one graph input and one graph output (it has {} and {})"),
                                 path, m.inputs.size(), m.outputs.size()));
  const BnPatterns pat = find_bn_pairs(m);
  const bool f32 = o.arithmetic.kind == ConvArithmeticKind::Float32;
  if (const BnPair* p = f32 ? whole_model_pair(m, pat) : nullptr) {
    const LayerParams lp = layer_params(m, *p);
    const DType dt = o.dtype.value_or(lp.dtype);
    Tensor x = model_input(m, input, 0, dt);
    const Shape in_shape = x.shape;
    Graph g = pair_graph(m, *p, lp, x, dt);
    if (o.progress) o.progress(fmt::format("bisect: certified reference and bounds of the layer ({})", layer_size(g)));
    KnownComputation k = layer_computation(g, x.data, o.confidence, o.ref);
    k.shape = layer_output_shape(m.nodes[p->layer], g.nodes[0].geometry, in_shape);
    k.source =
        fmt::format("{} (one {} -> BatchNormalization layer, {}): certified exact outputs", path, p->op, name(dt));
    return k;
  }
  if (o.dtype && *o.dtype != DType::Float32)
    throw InputError(fmt::format(fmt::runtime("{}: the end-to-end bound of a model models a float32 engine (" +
                                              field("dtype") + " {} given)"),
                                 path, name(*o.dtype)));
  const Tensor x = model_input(m, input, 0);
  OutputBoundOptions bo;
  bo.samples = o.samples;
  bo.seed = o.seed;
  bo.confidence = o.confidence;
  bo.threads = o.ref.threads;
  set_end_to_end_arithmetic(o.arithmetic, false, bo);
  if (o.progress)
    bo.progress = [&](std::size_t done, std::size_t total) {
      o.progress(fmt::format("bisect: end-to-end bound, perturbed float64 run {} of {}", done, total));
    };
  const OutputBound ob = output_bound(m, pat, {{m.inputs[0].name, x}}, bo);
  const std::string& out = m.outputs[0].name;
  KnownComputation k;
  k.exact = approximate_values(ob.reference.at(out).data, DType::Float32);
  k.shape = ob.reference.at(out).shape;
  k.bound = ob.bound.at(out);
  k.probabilistic = k.bound;
  k.deterministic = false;
  if (f32) k.band = model_band(m, x, ob.reference.at(out), o);
  k.source = fmt::format("{}: float64 run", path);
  k.formula = fmt::format(
      "per element, the end-to-end probabilistic bound of a {} engine folding or not ({} "
      "perturbed float64 runs, seed {}, confidence {:g}): {}",
      f32 ? "float32" : o.arithmetic.description() + " (float32 activations)", ob.samples, ob.seed, ob.confidence,
      ob.formula);
  return k;
}

}  // namespace foldcheck
