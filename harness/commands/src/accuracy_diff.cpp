// `foldcheck accuracy-diff` (accuracy_diff.hpp).
#include "foldcheck/commands/accuracy_diff.hpp"

#include <cmath>
#include <random>

#include <fmt/format.h>

#include "foldcheck/base/errors.hpp"
#include "foldcheck/model/fold_check.hpp"
#include "foldcheck/model/model.hpp"
#include "foldcheck/model/model_patterns.hpp"
#include "foldcheck/layer/attribution.hpp"
#include "foldcheck/numerics/dtype.hpp"
#include "foldcheck/layer/evaluate.hpp"
#include "foldcheck/layer/fold_pass.hpp"
#include "foldcheck/model/model_run.hpp"
#include "foldcheck/io/npy.hpp"
#include "foldcheck/model/output_bound.hpp"
#include "foldcheck/base/envelope.hpp"
#include "foldcheck/base/task_pool.hpp"

namespace foldcheck {
namespace {

using json = nlohmann::json;

std::vector<std::size_t> foldable_layers(const Model& m) {
  std::vector<std::size_t> r;
  for (std::size_t i = 0; i < m.nodes.size(); ++i)
    if (foldable_layer(m, m.nodes[i])) r.push_back(i);
  return r;
}

// The observed model's node for each original foldable node (see the matching rule).
std::map<std::size_t, std::size_t> match_layers(const Model& original, const Model& observed) {
  const std::vector<std::size_t> a = foldable_layers(original), b = foldable_layers(observed);
  if (a.size() != b.size())
    throw InputError(fmt::format("cannot match {} to {}: {} Conv/ConvTranspose/Gemm/MatMul layers against {} (folding "
                                 "neither adds nor removes them)",
                                 observed.path, original.path, b.size(), a.size()));
  std::map<std::size_t, std::size_t> m;
  for (std::size_t k = 0; k < a.size(); ++k) {
    const ModelNode &x = original.nodes[a[k]], &y = observed.nodes[b[k]];
    const Shape &sx = original.initializer(x.inputs[1])->shape, &sy = observed.initializer(y.inputs[1])->shape;
    if (x.op != y.op || sx != sy || x.int_attr("group", 1) != y.int_attr("group", 1))
      throw InputError(fmt::format("cannot match {} to {}: layer {} is {} {} (group {}) in the original but {} {} (group {}) "
                                   "in the observed model; the correspondence is ambiguous",
                                   observed.path, original.path, k, x.op, shape_string(sx), x.int_attr("group", 1), y.op,
                                   shape_string(sy), y.int_attr("group", 1)));
    m[a[k]] = b[k];
  }
  return m;
}

// A comparison's ULP summary for the table.
json ulp_summary(const Comparison& c) {
  return {{"verdict", name(c.verdict)},
          {"max_abs_ulp", c.ulp.max_abs},
          {"p99_9_abs_ulp", c.ulp.p999},
          {"worst_ratio", c.worst_bound_ratio ? json(*c.worst_bound_ratio) : json(nullptr)},
          {"beyond_bound", c.beyond_bound}};
}

// A Conv layer -> BatchNorm pair on its real input: the unfused path and the fused path
// (recipe `r`) in float32 against the certified reference, with their bounds, and the
// fused path's dominant error stage (stage attribution on a sample of outputs).
json layer_on_activations(const Model& m, const BnPair& p, const LayerParams& lp, Tensor x, const AccuracyDiffOptions& o,
                          Verdict& verdict) {
  const Graph g = pair_graph(m, p, lp, x, DType::Float32);
  const Node& c = g.nodes[0];
  ref::Options ro = o.ref;
  ro.formats = ref::format_bit(ref::kFloat32);
  ref::LayerData L{c.geometry, &x.data, &c.weight.data, c.bias.empty() ? nullptr : &c.bias, &g.nodes[1].bn};
  const ref::LayerResult exact = ref::conv_bn(L, ro);
  Policy pol;
  pol.threads = o.ref.threads;
  json j{{"input_shape", x.shape}, {"outputs", exact.y.size()}, {"terms_per_output", c.geometry.terms_per_output()}};
  for (const bool fused : {false, true}) {
    const Graph path = fused ? fold_batchnorm(g, o.recipe, o.ref) : g;
    const std::vector<double> y = evaluate(path, x.data, pol);
    const BoundReport br = error_bounds(path, exact, pol, o.confidence, &x.data);
    const Comparison cmp = compare(y, exact.y, DType::Float32, &br.bound, &br.probabilistic);
    json pj = ulp_summary(cmp);
    pj["bound"] = br.formula;
    verdict = worst(verdict, cmp.verdict == Verdict::Suspicious ? Verdict::Expected : cmp.verdict);
    pj["probabilistic_worst_ratio"] = cmp.worst_probabilistic_ratio ? json(*cmp.worst_probabilistic_ratio) : json(nullptr);
    if (o.attribution_elements > 0) {
      std::vector<std::size_t> worst_idx;
      if (cmp.worst_index >= 0) worst_idx.push_back(static_cast<std::size_t>(cmp.worst_index));
      const auto sample = attribution_sample(y.size(), o.attribution_elements, worst_idx);
      const Attribution a = attribute(g, x.data, exact, PathSpec{fused ? std::optional<Recipe>(o.recipe) : std::nullopt, pol},
                                      y, sample, o.ref, o.ref.threads);
      double best = -1;
      std::string dominant;
      for (unsigned s = 0; s < kNumStages; ++s) {
        if (a.contribution[s].empty()) continue;
        double ss = 0;
        for (const double v : a.contribution[s]) ss += v * v;
        if (ss > best) {
          best = ss;
          dominant = name(static_cast<Stage>(s));
        }
      }
      pj["dominant_stage"] = dominant;
      pj["attributed_elements"] = sample.size();
    }
    j[fused ? "fused" : "unfused"] = pj;
  }
  j["fused"]["recipe"] = name(o.recipe);
  return j;
}

// Argmax of each row of an [N, K] output.
std::vector<std::int64_t> top1(const Tensor& y) {
  std::vector<std::int64_t> r;
  if (y.shape.size() < 2) return r;
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

// --observed-output: the other engine's output y (on the same input) against the float64
// run, with the end-to-end bound of output_bound.hpp; foldcheck's float32 runs are held to
// the same bound (a self-check of the bound: they are engines of the modelled kind).
json observed_output_check(const Model& model, const BnPatterns& pat, const Runs& rr, const Tensor& y,
                           const AccuracyDiffOptions& opts, const std::function<void(const std::string&)>& say) {
  const std::string& out = model.outputs[0].name;
  const Tensor& y64 = rr.out64.at(out);
  if (y.shape != y64.shape)
    throw InputError(fmt::format("{}: shape {}, the model's output {} is {}", *opts.observed_output, shape_string(y.shape), out,
                                 shape_string(y64.shape)));
  OutputBoundOptions bo;
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
  const Comparison c = compare(yv, refv, DType::Float32, &bound);
  json j{{"path", *opts.observed_output},
         {"shape", y.shape},
         {"bound", ob.formula},
         {"lambda", ob.lambda},
         {"sqrt_c", ob.inflation},
         {"samples", ob.samples},
         {"seed", ob.seed},
         {"confidence", ob.confidence},
         {"comparison", to_json(c)}};
  // The bound's size, in float32 ULP of the reference (how tight the check is).
  std::vector<double> bulp;
  for (std::size_t i = 0; i < bound.size(); ++i) bulp.push_back(bound[i] / ulp(DType::Float32, refv.approx(i).hi, refv.approx(i).lo));
  std::sort(bulp.begin(), bulp.end());
  if (!bulp.empty())
    j["bound_ulp"] = {{"median", bulp[bulp.size() / 2]}, {"max", bulp.back()}, {"min", bulp.front()}};
  if (c.worst_bound_index >= 0) {
    const auto i = static_cast<std::size_t>(c.worst_bound_index);
    j["worst"] = {{"index", unravel_index(y.shape, i)}, {"flat_index", i}, {"observed", yv[i]},
                  {"reference", refv.approx(i).hi}, {"bound", bound[i]}, {"ratio", *c.worst_bound_ratio}};
  }
  const auto t64 = top1(ob.reference.at(out)), to = top1(Tensor{y.shape, yv, DType::Float32});
  if (!t64.empty() && y.shape.back() > 1) {
    std::int64_t agree = 0;
    for (std::size_t i = 0; i < t64.size(); ++i) agree += to[i] == t64[i];
    j["top1_agreement"] = {{"rows", t64.size()}, {"observed_vs_reference", agree}};
  }
  j["verdict"] = name(c.verdict);
  const Comparison cu = compare(rr.out32.at(out).data, refv, DType::Float32, &bound);
  const Comparison cf = compare(rr.out32f.at(out).data, refv, DType::Float32, &bound);
  j["foldcheck_runs"] = {{"unfused_worst_ratio", cu.worst_bound_ratio ? json(*cu.worst_bound_ratio) : json(nullptr)},
                         {"fused_worst_ratio", cf.worst_bound_ratio ? json(*cf.worst_bound_ratio) : json(nullptr)},
                         {"verdict", name(worst(cu.verdict, cf.verdict))}};
  return j;
}

// A message naming the model file once: some already begin with it (the layer's own checks).
std::string in_file(const std::string& path, const std::string& message) {
  return message.rfind(path + ": ", 0) == 0 ? message : path + ": " + message;
}

}  // namespace

json accuracy_diff(const std::string& model_path, const AccuracyDiffOptions& opts) {
  return accuracy_diff(Model::load(model_path), opts);
}

json accuracy_diff(const Model& model, const AccuracyDiffOptions& opts) {
  auto say = [&](const std::string& s) {
    if (opts.progress) opts.progress(s);
  };
  const BnPatterns pat = find_bn_pairs(model);
  std::optional<Model> observed;
  std::map<std::size_t, std::size_t> match;
  std::optional<Tensor> observed_y;
  if (opts.observed_output) {
    if (!opts.input)
      throw InputError("`observed_output` needs `input`: the input the other engine ran on");
    if (opts.weights_only) throw InputError("`observed_output` needs the runs (not `weights_only`)");
    if (model.outputs.size() != 1)
      throw InputError(fmt::format("{}: {} graph outputs; `observed_output` checks models with one", model.path,
                                   model.outputs.size()));
    observed_y = read_npy(*opts.observed_output);
    if (observed_y->dtype != DType::Float32 && observed_y->dtype != DType::Float64)
      throw InputError(fmt::format("{}: {} values; the end-to-end bound models an engine computing in float32",
                                   *opts.observed_output, name(observed_y->dtype)));
  }
  if (opts.observed_model) {
    observed = Model::load(*opts.observed_model);
    match = match_layers(model, *observed);
  }
  // The runs (see Runs). A model foldcheck cannot run (an unsupported op, several inputs)
  // still gets its weight-level checks; the runs and what depends on them are reported as
  // not run, with the reason.
  Runs rr;
  json end_to_end = nullptr;
  std::optional<std::string> not_run;
  // A model the ONNX spec forbids (an attribute, a type, a geometry) is bad input (exit 2)
  // for every mode: the weight-level checks would read the same nodes.
  try {
    check_attributes(model);
  } catch (const InputError& e) {
    throw InputError(in_file(model.path, e.what()));
  }
  if (!opts.weights_only) {
    if (model.inputs.size() != 1) {
      not_run = fmt::format("the model has {} graph inputs; the runs take models with one", model.inputs.size());
    } else {
      Tensor x = model_input(model, opts.input, opts.seed);  // a bad --input is the user's error (exit 2)
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
        } catch (const InputError& e) {
          if (opts.observed_output)
            throw InputError(fmt::format("`observed_output` needs runs of {}, which cannot be made: {}", model.path, e.what()));
          throw InputError(in_file(model.path, e.what()));
        }
      }
    }
    // --observed-output asks for nothing but what the runs give: without them it is an error.
    if (not_run && opts.observed_output)
      throw InputError(fmt::format("`observed_output` needs runs of {}, which cannot be made: {}", model.path, *not_run));
  }
  const bool runs = !opts.weights_only && !not_run;

  // Each pair is checked on its own (in parallel, one layer per thread at a time; the
  // reference inside runs single-threaded), then reported in graph order: the result does
  // not depend on the thread count.
  const std::size_t np = pat.pairs.size();
  std::vector<json> layer_json(np);
  std::vector<Verdict> layer_verdict(np, Verdict::Expected);
  auto check_pair = [&](std::size_t k) {
    const BnPair& p = pat.pairs[k];
    const LayerParams lp = layer_params(model, p);
    json lj{{"name", p.name},
            {"op", p.op},
            {"batchnorm", model.nodes[p.bn].name},
            {"dtype", name(lp.dtype)},
            {"weight_shape", lp.weight_shape},
            {"output_channels", lp.channels},
            {"conv_bias", !lp.bias.empty()},
            {"eps", lp.bn.eps}};
    if (!p.through.empty()) {
      json ids = json::array();
      for (const std::size_t i : p.through) ids.push_back(model.nodes[i].name);
      lj["through_identity"] = ids;
    }
    std::optional<ObservedFold> of;
    if (observed) {
      const std::size_t on = match.at(p.layer);
      const ModelNode& node = observed->nodes[on];
      // The observed layer must itself carry the fold: no BatchNormalization left after it.
      bool still_bn = false;
      for (const std::size_t c : observed->consumers_of(node.outputs.at(0)))
        still_bn = still_bn || observed->nodes[c].op == "BatchNormalization";
      lj["observed_node"] = node.name.empty() ? node.inputs[1] : node.name;
      if (still_bn) {
        lj["verdict"] = name(Verdict::Unexpected);
        lj["observed_note"] = "the observed model still applies a BatchNormalization after this layer: not folded";
        layer_json[k] = std::move(lj);
        layer_verdict[k] = Verdict::Unexpected;
        return;
      }
      const LayerParams ol = layer_params_of_node(*observed, on);
      if (ol.dtype != lp.dtype)
        throw InputError(fmt::format("layer {}: observed weights are {}, original {}", p.name, name(ol.dtype), name(lp.dtype)));
      of = ObservedFold{ol.weight, ol.bias};
    }
    ref::Options ro = opts.ref;
    ro.threads = 1;
    const FoldCheck fc = check_fold(lp, of, ro);
    lj["verdict"] = name(fc.verdict);
    lj["fold"] = to_json(fc);
    if (observed) {
      const RecipeFoldCheck& b = fc.recipes[fc.best];
      lj["worst_channel"] = fc.verdict == Verdict::Expected ? json(nullptr) : json(b.worst_channel);
      lj["closest_recipe"] = name(b.recipe);
    }
    layer_json[k] = std::move(lj);
    layer_verdict[k] = fc.verdict;
  };
  // The per-layer activation analyses (each uses every core itself), in graph order.
  auto activations = [&](std::size_t k) {
    const BnPair& p = pat.pairs[k];
    if (!runs) return;
    if (p.op == "ConvTranspose") {
      layer_json[k]["activations"] = {{"note", "ConvTranspose pairs: weight-level check only"}};
      return;
    }
    say(fmt::format("layers on their activations {} ({})", bar(k + 1, np), p.name));
    const LayerParams lp = layer_params(model, p);
    Verdict v = Verdict::Expected;
    layer_json[k]["activations"] = layer_on_activations(model, p, lp, rr.acts.at(model.nodes[p.layer].inputs[0]), opts, v);
    layer_json[k]["activations"]["verdict"] = name(v);
    layer_verdict[k] = worst(layer_verdict[k], v);
    if (layer_json[k]["verdict"] != "UNEXPECTED") layer_json[k]["verdict"] = name(layer_verdict[k]);
  };
  detail::run_tasks(np, opts.ref.threads, check_pair, [&](std::size_t k, std::size_t done) {
    say(fmt::format("folded parameters {} layers ({})", bar(done, np), pat.pairs[k].name));
  });
  for (std::size_t k = 0; k < np; ++k) activations(k);
  if (not_run) end_to_end = {{"not_run", *not_run}};
  if (runs) {
    end_to_end = json::object();
    json outs = json::array();
    bool outputs_compared_nothing = false;
    for (const ValueInfo& vi : model.outputs) {
      const Tensor& y64 = rr.out64.at(vi.name);
      const ref::ValueArray refv = approximate_values(y64.data, DType::Float32);
      json oj{{"name", vi.name}, {"shape", y64.shape}};
      const Comparison cu = compare(rr.out32.at(vi.name).data, refv, DType::Float32);
      const Comparison cf = compare(rr.out32f.at(vi.name).data, refv, DType::Float32);
      // An output whose reference is all zero or not finite (a Div by zero) compared
      // nothing: the end-to-end verdict cannot be a pass (below).
      if (cu.verdict == Verdict::Mistrusted || cf.verdict == Verdict::Mistrusted) outputs_compared_nothing = true;
      oj["unfused"] = to_json(cu);
      oj["fused"] = to_json(cf);
      const auto t64 = top1(y64), tu = top1(rr.out32.at(vi.name)), tf = top1(rr.out32f.at(vi.name));
      if (!t64.empty() && y64.shape.back() > 1) {
        std::int64_t au = 0, af = 0, uf = 0;
        for (std::size_t i = 0; i < t64.size(); ++i) {
          au += tu[i] == t64[i];
          af += tf[i] == t64[i];
          uf += tu[i] == tf[i];
        }
        oj["top1_agreement"] = {{"rows", t64.size()}, {"unfused_vs_reference", au}, {"fused_vs_reference", af},
                                {"fused_vs_unfused", uf}};
      }
      outs.push_back(std::move(oj));
    }
    end_to_end["reference"] = "float64 run of the unfused model (each operation within 2^-53 relative)";
    end_to_end["fused_recipe"] = name(opts.recipe);
    end_to_end["input"] = opts.input ? json(*opts.input) : json(fmt::format("seeded standard normal, seed {}", opts.seed));
    end_to_end["input_shape"] = rr.x.shape;
    end_to_end["outputs"] = outs;
    json first = nullptr;
    Verdict e2e = Verdict::Expected;
    for (std::size_t k = 0; k < np; ++k) {
      if (!layer_json[k].contains("activations") || !layer_json[k]["activations"].contains("verdict")) continue;
      // A MISTRUSTED layer (every exact value zero) compared nothing: it is not beyond its
      // bound, and it makes the whole MISTRUSTED, never UNEXPECTED or a pass.
      const std::string v = layer_json[k]["activations"]["verdict"];
      const Verdict lv = v == "EXPECTED" ? Verdict::Expected : v == "MISTRUSTED" ? Verdict::Mistrusted : Verdict::Unexpected;
      if (lv == Verdict::Unexpected && first.is_null()) first = layer_json[k]["name"];
      e2e = worst(e2e, lv);
    }
    if (observed_y) {
      json oo = observed_output_check(model, pat, rr, *observed_y, opts, say);
      for (json& oj : outs) {  // foldcheck's own float32 runs against the same bound
        oj["unfused"]["worst_bound_ratio"] = oo["foldcheck_runs"]["unfused_worst_ratio"];
        oj["fused"]["worst_bound_ratio"] = oo["foldcheck_runs"]["fused_worst_ratio"];
      }
      end_to_end["outputs"] = outs;
      if (oo["foldcheck_runs"]["verdict"] != "EXPECTED") e2e = Verdict::Unexpected;
      end_to_end["observed_output"] = std::move(oo);
    }
    if (outputs_compared_nothing) e2e = worst(e2e, Verdict::Mistrusted);
    end_to_end["first_layer_beyond_bound"] = first;
    end_to_end["verdict"] = name(e2e);
  }
  Verdict overall = Verdict::Expected;
  if (end_to_end.is_object() && end_to_end.contains("observed_output"))
    overall = worst(overall, end_to_end["observed_output"]["verdict"] == "EXPECTED"     ? Verdict::Expected
                             : end_to_end["observed_output"]["verdict"] == "MISTRUSTED" ? Verdict::Mistrusted
                                                                                        : Verdict::Unexpected);
  if (end_to_end.is_object() && end_to_end.value("verdict", "") == "MISTRUSTED") overall = worst(overall, Verdict::Mistrusted);
  json layers = json::array();
  for (std::size_t k = 0; k < np; ++k) {
    overall = worst(overall, layer_verdict[k]);
    layers.push_back(std::move(layer_json[k]));
  }
  // Nothing checked is not a pass (a model without foldable pairs, checked against nothing).
  if (np == 0) overall = Verdict::Mistrusted;
  json unpaired = json::array();
  for (const UnpairedBn& u : pat.unpaired) unpaired.push_back({{"batchnorm", u.name}, {"reason", u.reason}});
  json inputs = json::array();
  for (const ValueInfo& v : model.inputs) inputs.push_back({{"name", v.name}, {"shape", v.shape}});
  json out = result_envelope("accuracy-diff");
  out.update(json{{"model", {{"path", model.path}, {"producer", model.producer}, {"opset", model.opset},
                      {"nodes", model.nodes.size()}, {"inputs", inputs}}},
           {"pairs_found", pat.pairs.size()},
           {"layers", layers},
           {"unpaired", unpaired}});
  if (!opts.weights_only) out["end_to_end"] = end_to_end;
  if (observed)
    out["observed"] = {{"path", observed->path},
                       {"producer", observed->producer},
                       {"matching", "foldable layers (Conv, ConvTranspose, Gemm, MatMul with initializer weights) in "
                                    "graph order, one to one; same op, weight shape and group"}};
  out["verdict"] = name(overall);
  return out;
}

}  // namespace foldcheck
