// `foldcheck accuracy-diff` (accuracy_diff.hpp).
#include "foldcheck/commands/accuracy_diff.hpp"

#include <algorithm>
#include <cmath>
#include <random>
#include <set>

#include <fmt/format.h>

#include "foldcheck/base/envelope.hpp"
#include "foldcheck/base/errors.hpp"
#include "foldcheck/base/task_pool.hpp"
#include "foldcheck/io/npy.hpp"
#include "foldcheck/layer/attribution.hpp"
#include "foldcheck/layer/evaluate.hpp"
#include "foldcheck/layer/fold_pass.hpp"
#include "foldcheck/model/fold_check.hpp"
#include "foldcheck/model/layer_computation.hpp"
#include "foldcheck/model/layer_match.hpp"
#include "foldcheck/model/model.hpp"
#include "foldcheck/model/model_patterns.hpp"
#include "foldcheck/model/model_run.hpp"
#include "foldcheck/model/output_bound.hpp"
#include "foldcheck/numerics/dtype.hpp"
#include "foldcheck/reports/no_pairs_reasoning.hpp"

namespace foldcheck {
namespace {

// The fused path's stage attribution on a sample of its outputs (the worst among them).
Attribution attribution_of(const Graph& g, const Tensor& x, const ref::LayerResult& exact, const std::vector<double>& y,
                           const Comparison& cmp, const AccuracyDiffOptions& o, const Policy& pol) {
  std::vector<std::size_t> worst_idx;
  if (cmp.worst_index >= 0) worst_idx.push_back(static_cast<std::size_t>(cmp.worst_index));
  const auto sample = attribution_sample(y.size(), o.attribution_elements, worst_idx);
  return attribute(g, x.data, exact, PathSpec{std::optional<Recipe>(o.recipe), pol}, y, sample, o.ref, o.ref.threads);
}

// A Conv layer -> BatchNorm pair on its real input: the unfused path and the fused path
// (recipe `r`) in float32 against the certified reference, with their bounds, and the
// fused path's dominant error stage (stage attribution on a sample of outputs).
LayerActivations layer_on_activations(const Model& m, const BnPair& p, const LayerParams& lp, Tensor x,
                                      const AccuracyDiffOptions& o) {
  const Graph g = pair_graph(m, p, lp, x, DType::Float32);
  const Node& c = g.nodes[0];
  ref::Options ro = o.ref;
  ro.formats = ref::format_bit(ref::kFloat32);
  ref::LayerData L{c.geometry, &x.data, &c.weight.data, c.bias.empty() ? nullptr : &c.bias, &g.nodes[1].bn};
  const ref::LayerResult exact = ref::conv_bn(L, ro);
  Policy pol;
  pol.threads = o.ref.threads;
  LayerActivations a;
  a.input_shape = x.shape;
  a.outputs = exact.y.size();
  a.terms_per_output = c.geometry.terms_per_output();
  for (const bool fused : {false, true}) {
    const Graph path = fused ? fold_batchnorm(g, o.recipe, o.ref) : g;
    const std::vector<double> y = evaluate(path, x.data, pol);
    const BoundReport br = error_bounds(path, exact, pol, o.confidence, &x.data);
    PathOnActivations& pa = fused ? a.fused : a.unfused;
    pa.comparison = compare(y, exact.y, DType::Float32, &br.bound, &br.probabilistic);
    pa.bound = br.formula;
    if (!fused) continue;
    pa.recipe = o.recipe;
    // Reported for the fused path only (its dominant stage).
    if (o.attribution) pa.attribution = attribution_of(g, x, exact, y, pa.comparison, o, pol);
  }
  return a;
}

// Argmax of each row of an [N, K] output: class scores. Other ranks (a feature map
// [N, C, H, W]) have no top-1 to agree on: empty.
std::vector<std::int64_t> top1(const Tensor& y) {
  std::vector<std::int64_t> r;
  if (y.shape.size() != 2) return r;
  const std::int64_t N = y.shape[0], K = y.size() / std::max<std::int64_t>(N, 1);
  for (std::int64_t n = 0; n < N; ++n) {
    const auto b = y.data.begin() + n * K;
    r.push_back(std::max_element(b, b + K) - b);
  }
  return r;
}

// "[#######.............]  7/20": a text progress bar for status lines.
std::string bar(std::size_t done, std::size_t total) {
  constexpr std::size_t kWidth = 24;
  const std::size_t filled = total ? done * kWidth / total : kWidth;
  return fmt::format("[{}{}] {}/{}", std::string(filled, '#'), std::string(kWidth - filled, '.'), done, total);
}

// The model's runs: float32 unfused (keeping every analysed pair's input activation),
// float32 fused by opts.recipe, and float64 unfused (the reference precision).
struct Runs {
  Tensor x;
  std::map<std::string, Tensor> acts, out32, out32f, out64;
};

Runs run_all(const Model& model, const BnPatterns& pat, const AccuracyDiffOptions& opts, Tensor x,
             const std::function<void(const std::string&)>& say) {
  Runs r;
  r.x = std::move(x);
  const std::map<std::string, Tensor> inputs{{model.inputs[0].name, r.x}};
  ModelRunOptions ro;
  ro.ref = opts.ref;
  ro.recipe = opts.recipe;
  ro.policy.threads = opts.ref.threads;
  for (const BnPair& p : pat.pairs)
    if (p.op != "ConvTranspose") ro.keep.insert(model.nodes[p.layer].inputs[0]);
  auto progress_for = [&](const std::string& what) {
    return [&, what](std::size_t done, std::size_t total) { say(fmt::format("{} {} nodes", what, bar(done, total))); };
  };
  ro.progress = progress_for("float32 run, BatchNorms unfused");
  r.out32 = run_model(model, pat, inputs, ro);
  for (const std::string& k : ro.keep) r.acts[k] = r.out32.at(k);
  ro.keep.clear();
  ro.fused = true;
  ro.progress = progress_for(fmt::format("float32 run, BatchNorms folded ({})", name(opts.recipe)));
  r.out32f = run_model(model, pat, inputs, ro);
  ro.fused = false;
  ro.dtype = DType::Float64;
  ro.progress = progress_for("float64 run (reference precision)");
  r.out64 = run_model(model, pat, inputs, ro);
  return r;
}

// The end-to-end bound's arithmetic for an observed output computed in `a`
// (set_end_to_end_arithmetic): activations stored in the 16-bit format when every observed
// value is one of its values (torch.autocast's outputs).
void end_to_end_arithmetic(const ConvArithmetic& a, const Tensor& y, OutputBoundOptions& bo) {
  set_end_to_end_arithmetic(a, stored_in_16_bits(a, y.data), bo);
}

// --observed-output: the other engine's output y (on the same input) against the float64
// run, with the end-to-end bound of output_bound.hpp; foldcheck's float32 runs are held to
// the same bound (a self-check of the bound: they are engines of the modelled kind).
ObservedOutputCheck observed_output_check(const Model& model, const BnPatterns& pat, const Runs& rr, const Tensor& y,
                                          const AccuracyDiffOptions& opts,
                                          const std::function<void(const std::string&)>& say) {
  const std::string& out = model.outputs[0].name;
  const Tensor& y64 = rr.out64.at(out);
  if (y.shape != y64.shape)
    throw InputError(fmt::format("{}: shape {}, the model's output {} is {}", *opts.observed_output,
                                 shape_string(y.shape), out, shape_string(y64.shape)));
  OutputBoundOptions bo;
  end_to_end_arithmetic(opts.arithmetic, y, bo);
  bo.samples = opts.output_samples;
  bo.seed = opts.seed;
  bo.confidence = opts.confidence;
  bo.threads = opts.ref.threads;
  bo.progress = [&](std::size_t done, std::size_t total) {
    say(fmt::format("end-to-end bound: perturbed float64 runs {}", bar(done, total)));
  };
  const OutputBound ob = output_bound(model, pat, {{model.inputs[0].name, rr.x}}, bo);
  const std::vector<double>& bound = ob.bound.at(out);
  const ref::ValueArray refv = approximate_values(ob.reference.at(out).data, DType::Float32);
  std::vector<double> yv = y.data;
  for (double& v : yv) v = round_to(DType::Float32, v);  // float64 files: the float32 value an engine would hold
  ObservedOutputCheck r;
  r.path = *opts.observed_output;
  r.shape = y.shape;
  r.bound = ob.formula;
  r.lambda = ob.lambda;
  r.sqrt_c = ob.inflation;
  r.samples = ob.samples;
  r.seed = ob.seed;
  r.confidence = ob.confidence;
  r.observed = compare(yv, refv, DType::Float32, &bound);
  r.unfused = compare(rr.out32.at(out).data, refv, DType::Float32, &bound);
  r.fused = compare(rr.out32f.at(out).data, refv, DType::Float32, &bound);
  const Comparison& c = r.observed;
  // The bound's size, in float32 ULP of the reference (how tight the check is).
  std::vector<double> bulp;
  for (std::size_t i = 0; i < bound.size(); ++i)
    bulp.push_back(bound[i] / ulp(DType::Float32, refv.approx(i).hi, refv.approx(i).lo));
  std::sort(bulp.begin(), bulp.end());
  if (!bulp.empty()) r.bound_ulp = ObservedOutputCheck::BoundUlp{bulp[bulp.size() / 2], bulp.back(), bulp.front()};
  if (c.worst_bound_index >= 0) {
    const auto i = static_cast<std::size_t>(c.worst_bound_index);
    r.worst = ObservedOutputCheck::Worst{unravel_index(y.shape, i), i,        yv[i],
                                         refv.approx(i).hi,         bound[i], *c.worst_bound_ratio};
  }
  if (opts.arithmetic.kind == ConvArithmeticKind::Float32) {
    OutputBandOptions bo2;
    bo2.seed = opts.seed;
    bo2.threads = opts.ref.threads;
    bo2.progress = say;
    r.band = output_band(model, pat, rr.x, y64, yv, bo2);
  } else {
    r.band.not_computed =
        std::string("the band's honest runs are float32; ") + opts.arithmetic.name() + " is judged by the bound alone";
  }
  const auto t64 = top1(ob.reference.at(out)), to = top1(Tensor{y.shape, yv, DType::Float32});
  if (!t64.empty() && y.shape.back() > 1) {
    std::int64_t agree = 0;
    for (std::size_t i = 0; i < t64.size(); ++i) agree += to[i] == t64[i];
    r.top1 = ObservedOutputCheck::Top1{t64.size(), agree};
  }
  return r;
}

// A message naming the model file once: some already begin with it (the layer's own checks).
std::string in_file(const std::string& path, const std::string& message) {
  return message.rfind(path + ": ", 0) == 0 ? message : path + ": " + message;
}

using Say = std::function<void(const std::string&)>;

// The other engine's outputs, read and checked before anything runs.
std::optional<Tensor> read_observed_output(const Model& model, const AccuracyDiffOptions& opts) {
  if (!opts.observed_output) return std::nullopt;
  if (!opts.input)
    throw InputError(field("observed_output") + " needs " + field("input") + ": the input the other engine ran on");
  if (opts.weights_only)
    throw InputError(field("observed_output") + " needs the runs (not " + field("weights_only") + ")");
  if (model.outputs.size() != 1)
    throw InputError(
        fmt::format(fmt::runtime("{}: {} graph outputs; " + field("observed_output") + " checks models with one"),
                    model.path, model.outputs.size()));
  Tensor y = read_npy(*opts.observed_output);
  if (y.dtype != DType::Float32 && y.dtype != DType::Float64 && opts.arithmetic.kind == ConvArithmeticKind::Float32)
    throw InputError(
        fmt::format(fmt::runtime("{}: {} values; the end-to-end bound models an engine computing in float32 "
                                 "(or give the " +
                                 field("arithmetic") + " it computed in: bf16, fp16)"),
                    *opts.observed_output, name(y.dtype)));
  const bool narrow = y.dtype == DType::Float16 || y.dtype == DType::BFloat16;
  const ConvArithmeticKind own = y.dtype == DType::Float16 ? ConvArithmeticKind::FP16 : ConvArithmeticKind::BF16;
  if (narrow && opts.arithmetic.kind != own)
    throw InputError(fmt::format(fmt::runtime("{}: {} values; an engine that stores {} activations computes in " +
                                              field("arithmetic") + " {}, not {}"),
                                 *opts.observed_output, name(y.dtype), name(y.dtype), ConvArithmetic{own}.name(),
                                 opts.arithmetic.name()));
  OutputBoundOptions checked;  // refused now, before the runs, when not in the arithmetic
  end_to_end_arithmetic(opts.arithmetic, y, checked);
  return y;
}

// The runs (see Runs). A model foldcheck cannot run (an unsupported op, several inputs)
// still gets its weight-level checks; the runs and what depends on them are reported as not
// run, with the reason (`not_run`).
Runs make_runs(const Model& model, const BnPatterns& pat, const AccuracyDiffOptions& opts, const Say& say,
               std::optional<std::string>& not_run) {
  Runs rr;
  if (model.inputs.size() != 1) {
    not_run = fmt::format("the model has {} graph inputs; the runs take models with one", model.inputs.size());
  } else if (model.outputs.empty()) {
    not_run = "the model declares no graph outputs: the runs have nothing to compute";
  } else {
    // A bad input file is the user's error (exit 2). A batch of the model's inputs is run at
    // once: the band of --observed-output then sums each direction's evidence over the items.
    Tensor x = model_input(model, opts.input, opts.seed, DType::Float32, Batch::Free);
    try {
      check_supported(model);
    } catch (const InputError& e) {
      not_run = e.what();
    }
    // A model the runner supports but that cannot run as the ONNX spec defines it (shapes
    // that do not fit, a kernel larger than its input, an output over the element limit)
    // is bad input: exit 2 naming the file and the node, never runs reported as not made.
    if (!not_run) {
      try {
        rr = run_all(model, pat, opts, std::move(x), say);
        if (const auto y = rr.out64.find(model.outputs[0].name); y != rr.out64.end())  // (none: no runs made)
          if (const std::string mixed = batch_output_mismatch(model, rr.x, y->second); !mixed.empty())
            throw InputError(mixed);
      } catch (const InputError& e) {
        if (opts.observed_output)
          throw InputError(
              fmt::format(fmt::runtime(field("observed_output") + " needs runs of {}, which cannot be made: {}"),
                          model.path, e.what()));
        throw InputError(in_file(model.path, e.what()));
      }
    }
  }
  // The other engine's outputs ask for nothing but what the runs give: without them, an error.
  if (not_run && opts.observed_output)
    throw InputError(fmt::format(fmt::runtime(field("observed_output") + " needs runs of {}, which cannot be made: {}"),
                                 model.path, *not_run));
  return rr;
}

// The observed model, its layers matched to the original's, and the original's layer input
// shapes where known (by the original's layer node: what resolves a SAME auto_pad).
struct Observed {
  const Model* model = nullptr;
  std::map<std::size_t, std::size_t> match;
  std::map<std::size_t, Shape> input_shapes;
};

// The pairs' input shapes, for comparing their pads with the observed model's
// (layer_computation.hpp): from the runs when made; without them (weights only), from one
// float32 run made only when some pair's pads are written differently on the two sides; none
// when the model cannot run (the pads are then compared at every input size).
std::map<std::size_t, Shape> pair_input_shapes(const Model& model, const BnPatterns& pat, const Observed& obs,
                                               const Runs& rr, bool runs, const AccuracyDiffOptions& opts) {
  std::map<std::size_t, Shape> shapes;
  std::set<std::string> wanted;
  for (const BnPair& p : pat.pairs) {
    const std::string& x = model.nodes[p.layer].inputs.at(0);
    if (runs && rr.acts.contains(x)) shapes[p.layer] = rr.acts.at(x).shape;
    else if (const auto on = obs.match.find(p.layer);
             on != obs.match.end() && pads_need_input_shape(model, p.layer, *obs.model, on->second))
      wanted.insert(x);
  }
  if (wanted.empty() || !opts.weights_only || model.inputs.size() != 1) return shapes;
  try {
    ModelRunOptions ro;
    ro.keep = wanted;
    ro.policy.threads = opts.ref.threads;
    const auto values =
        run_model(model, pat,
                  {{model.inputs[0].name, model_input(model, opts.input, opts.seed, DType::Float32, Batch::Free)}}, ro);
    for (const BnPair& p : pat.pairs)
      if (const auto it = values.find(model.nodes[p.layer].inputs.at(0)); it != values.end())
        shapes[p.layer] = it->second.shape;
  } catch (const InputError&) {  // a model foldcheck cannot run: pads compared at every input size
  }
  return shapes;
}

// One pair's weight-level check (and, with an observed model, its match).
LayerDiff check_pair(const Model& model, const BnPair& p, const Observed& obs, const ref::Options& ref_opts) {
  const LayerParams lp = layer_params(model, p);
  LayerDiff d;
  d.identity.name = p.name;
  d.identity.op = p.op;
  d.identity.batchnorm = model.nodes[p.bn].name;
  d.identity.dtype = lp.dtype;
  d.identity.weight_shape = lp.weight_shape;
  d.identity.output_channels = lp.channels;
  d.identity.conv_bias = !lp.bias.empty();
  d.identity.eps = lp.bn.eps;
  for (const std::size_t i : p.through) d.identity.through_identity.push_back(model.nodes[i].name);
  std::optional<ObservedFold> of;
  if (obs.model) {
    const std::size_t on = obs.match.at(p.layer);
    const ModelNode& node = obs.model->nodes[on];
    d.identity.observed_node = node.name.empty() ? node.inputs[1] : node.name;
    // The observed layer must itself carry the fold: no BatchNormalization left after it.
    d.observed_not_folded = batchnorm_after(*obs.model, on).has_value();
    if (d.observed_not_folded) return d;
    const auto shape = obs.input_shapes.find(p.layer);
    d.not_the_layer = computation_differences(model, p.layer, *obs.model, on,
                                              shape == obs.input_shapes.end() ? nullptr : &shape->second);
    const LayerParams ol = layer_params_of_node(*obs.model, on);
    if (ol.dtype != lp.dtype)
      throw InputError(
          fmt::format("layer {}: observed weights are {}, original {}", p.name, name(ol.dtype), name(lp.dtype)));
    of = ObservedFold{ol.weight, ol.bias};
  }
  ref::Options ro = ref_opts;
  ro.threads = 1;
  d.fold = check_fold(lp, of, ro);
  return d;
}

// Every pair: its weight-level check, then its analysis on its activations, each in parallel,
// one layer per thread at a time (the comparisons' statistics and the attribution replays
// are serial per layer, so layers side by side use the cores better than one layer's
// parallel parts; peak memory is then that of as many layers as threads), reported in
// graph order: the result does not depend on the thread count.
std::vector<LayerDiff> check_layers(const Model& model, const BnPatterns& pat, const Observed& obs, const Runs& rr,
                                    bool runs, const AccuracyDiffOptions& opts, const Say& say) {
  const std::size_t np = pat.pairs.size();
  std::vector<LayerDiff> layers(np);
  detail::run_tasks(
      np, opts.ref.threads,
      [&](std::size_t k) {
        layers[k] = check_pair(model, pat.pairs[k], obs, opts.ref);
        if (const auto u = opts.unmodelled.find(pat.pairs[k].name); u != opts.unmodelled.end())
          layers[k].unmodelled = u->second;
      },
      [&](std::size_t k, std::size_t done) {
        say(fmt::format("folded parameters {} layers ({})", bar(done, np), pat.pairs[k].name));
      });
  if (!runs) return layers;
  // Layers side by side (at most one per thread), each with the threads left over: a model
  // with fewer pairs than threads gives each its share of the cores.
  const unsigned nt = detail::thread_count(opts.ref.threads);
  const unsigned outer = static_cast<unsigned>(std::max<std::size_t>(1, std::min<std::size_t>(nt, np)));
  AccuracyDiffOptions one = opts;
  one.ref.threads = std::max(1u, nt / outer);
  detail::run_tasks(
      np, outer,
      [&](std::size_t k) {
        const BnPair& p = pat.pairs[k];
        if (p.op == "ConvTranspose") {
          layers[k].activations_note = "ConvTranspose pairs: weight-level check only";
          return;
        }
        const LayerParams lp = layer_params(model, p);
        layers[k].activations = layer_on_activations(model, p, lp, rr.acts.at(model.nodes[p.layer].inputs[0]), one);
      },
      [&](std::size_t k, std::size_t done) {
        say(fmt::format("layers on their activations {} ({})", bar(done, np), pat.pairs[k].name));
      });
  return layers;
}

// Per output: foldcheck's float32 runs against the float64 run, and top-1 agreement.
OutputRuns output_runs(const ValueInfo& vi, const Runs& rr) {
  const Tensor& y64 = rr.out64.at(vi.name);
  const ref::ValueArray refv = approximate_values(y64.data, DType::Float32);
  OutputRuns o;
  o.name = vi.name;
  o.shape = y64.shape;
  o.unfused = compare(rr.out32.at(vi.name).data, refv, DType::Float32);
  o.fused = compare(rr.out32f.at(vi.name).data, refv, DType::Float32);
  const auto t64 = top1(y64), tu = top1(rr.out32.at(vi.name)), tf = top1(rr.out32f.at(vi.name));
  if (!t64.empty() && y64.shape.back() > 1) {
    Top1Agreement t;
    t.rows = static_cast<std::int64_t>(t64.size());
    for (std::size_t i = 0; i < t64.size(); ++i) {
      t.unfused_vs_reference += tu[i] == t64[i];
      t.fused_vs_reference += tf[i] == t64[i];
      t.fused_vs_unfused += tu[i] == tf[i];
    }
    o.top1 = t;
  }
  return o;
}

// The end-to-end runs, and the observed output against them. An observed output of another
// shape is bad input (observed_output_check), unless an observed layer computes something else
// than the model's (`other_layers`): its shape is then that computation's, and not compared.
EndToEnd end_to_end(const Model& model, const BnPatterns& pat, const Runs& rr, const std::optional<Tensor>& observed_y,
                    bool other_layers, const AccuracyDiffOptions& opts, const Say& say) {
  EndToEnd e;
  for (const ValueInfo& vi : model.outputs) e.outputs.push_back(output_runs(vi, rr));
  e.fused_recipe = opts.recipe;
  e.input = opts.input ? *opts.input : fmt::format("seeded standard normal, seed {}", opts.seed);
  e.input_shape = rr.x.shape;
  if (!observed_y) return e;
  const Shape& want = rr.out64.at(model.outputs[0].name).shape;
  if (other_layers && observed_y->shape != want)
    e.observed_output_not_checked = fmt::format(
        "it has shape {}, the model's output {} is {}: an observed layer computes something else than the "
        "model's (its observed_note)",
        shape_string(observed_y->shape), model.outputs[0].name, shape_string(want));
  else e.observed_output = observed_output_check(model, pat, rr, *observed_y, opts, say);
  return e;
}

// Why no pair was found: the model's foldable layers and BatchNorms, and the observed model's pairs.
reports::NoPairsFacts no_pairs_facts(const Model& model, const Model* observed) {
  reports::NoPairsFacts f;
  f.model = model.path;
  f.producer = model.producer;
  for (const ModelNode& n : model.nodes) {
    f.foldable_layers += foldable_layer(model, n);
    f.batchnorms += n.op == "BatchNormalization";
  }
  if (const BnPatterns p = find_bn_pairs(model); !p.unpaired.empty()) {
    f.first_unpaired = p.unpaired.front().name + ": " + p.unpaired.front().reason;
    for (const UnpairedBn& u : p.unpaired)
      if (u.after_layer) {
        f.unfoldable = u.name + ": " + u.reason;
        break;
      }
  }
  if (observed) {
    f.observed = observed->path;
    f.observed_pairs = find_bn_pairs(*observed).pairs.size();
  }
  return f;
}

}  // namespace

AccuracyDiffResult accuracy_diff(const std::string& model_path, const AccuracyDiffOptions& opts) {
  return accuracy_diff(Model::load(model_path), opts);
}

AccuracyDiffResult accuracy_diff(const Model& model, const AccuracyDiffOptions& opts) {
  auto say = [&](const std::string& s) {
    if (opts.progress) opts.progress(s);
  };
  const BnPatterns pat = find_bn_pairs(model);
  const std::optional<Tensor> observed_y = read_observed_output(model, opts);
  std::optional<Model> loaded;
  if (opts.observed_model && !opts.observed) loaded = Model::load(*opts.observed_model);
  const Model* observed_model = opts.observed ? opts.observed : loaded ? &*loaded : nullptr;
  Observed obs;
  if (observed_model) {
    obs.model = observed_model;
    obs.match = match_layers(model, *observed_model);
  }
  // A model the ONNX spec forbids (an attribute, a type, a geometry) is bad input (exit 2)
  // for every mode: the weight-level checks would read the same nodes.
  try {
    check_attributes(model);
  } catch (const InputError& e) {
    throw InputError(in_file(model.path, e.what()));
  }
  std::optional<std::string> not_run;
  const Runs rr = opts.weights_only ? Runs{} : make_runs(model, pat, opts, say, not_run);
  const bool runs = !opts.weights_only && !not_run;
  if (obs.model) obs.input_shapes = pair_input_shapes(model, pat, obs, rr, runs, opts);
  AccuracyDiffResult r;
  r.layers = check_layers(model, pat, obs, rr, runs, opts, say);
  if (!opts.weights_only) {
    const bool other_layers =
        std::ranges::any_of(r.layers, [](const LayerDiff& d) { return !d.not_the_layer.empty(); });
    if (runs) r.end_to_end = end_to_end(model, pat, rr, observed_y, other_layers, opts, say);
    else {
      r.end_to_end.emplace();
      r.end_to_end->not_run = not_run;
    }
  }
  if (r.layers.empty()) r.reasoning = reports::no_pairs_reasoning(no_pairs_facts(model, observed_model));
  r.unpaired = pat.unpaired;
  r.model = ModelFacts{model.path, model.producer, model.opset, model.nodes.size(), model.inputs};
  if (observed_model) r.observed = ObservedModel{observed_model->path, observed_model->producer};
  return r;
}

}  // namespace foldcheck
