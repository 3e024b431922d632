// `foldcheck accuracy-diff` (accuracy_diff.hpp).
#include "foldcheck/accuracy_diff.hpp"

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "foldcheck/errors.hpp"
#include "foldcheck/fold_check.hpp"
#include "foldcheck/model.hpp"
#include "foldcheck/model_patterns.hpp"
#include "foldcheck/version.hpp"

namespace foldcheck {
namespace {

using json = nlohmann::json;

bool foldable_layer(const Model& m, const ModelNode& n) {
  return (n.op == "Conv" || n.op == "ConvTranspose" || n.op == "Gemm" || n.op == "MatMul") && n.inputs.size() >= 2 &&
         m.initializer(n.inputs[1]) != nullptr;
}

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

}  // namespace

json accuracy_diff(const std::string& model_path, const AccuracyDiffOptions& opts) {
  const auto t0 = std::chrono::steady_clock::now();
  auto say = [&](const std::string& s) {
    if (opts.progress) opts.progress(s);
  };
  const Model model = Model::load(model_path);
  const BnPatterns pat = find_bn_pairs(model);
  std::optional<Model> observed;
  std::map<std::size_t, std::size_t> match;
  if (opts.observed_model) {
    observed = Model::load(*opts.observed_model);
    match = match_layers(model, *observed);
  }
  // Each pair is checked on its own (in parallel, one layer per thread at a time; the
  // reference inside runs single-threaded), then reported in graph order: the result does
  // not depend on the thread count.
  const std::size_t np = pat.pairs.size();
  std::vector<json> layer_json(np);
  std::vector<Verdict> layer_verdict(np, Verdict::Expected);
  std::vector<std::exception_ptr> errors(np);
  std::mutex progress_mutex;
  std::size_t done = 0;
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
  unsigned nt = opts.ref.threads ? opts.ref.threads : std::max(1u, std::thread::hardware_concurrency());
  nt = static_cast<unsigned>(std::max<std::size_t>(1, std::min<std::size_t>(nt, np)));
  std::atomic<std::size_t> next{0};
  auto worker = [&] {
    for (std::size_t k; (k = next++) < np;) {
      try {
        check_pair(k);
      } catch (...) {
        errors[k] = std::current_exception();
      }
      std::lock_guard<std::mutex> lock(progress_mutex);
      say(fmt::format("layers checked: {}/{} ({})", ++done, np, pat.pairs[k].name));
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < nt; ++t) pool.emplace_back(worker);
  worker();
  for (auto& th : pool) th.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
  Verdict overall = Verdict::Expected;
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
  json out{{"tool", "foldcheck"},
           {"version", kVersion},
           {"command", "accuracy-diff"},
           {"model", {{"path", model.path}, {"producer", model.producer}, {"opset", model.opset},
                      {"nodes", model.nodes.size()}, {"inputs", inputs}}},
           {"pairs_found", pat.pairs.size()},
           {"layers", layers},
           {"unpaired", unpaired}};
  if (observed)
    out["observed"] = {{"path", observed->path},
                       {"producer", observed->producer},
                       {"matching", "foldable layers (Conv, ConvTranspose, Gemm, MatMul with initializer weights) in "
                                    "graph order, one to one; same op, weight shape and group"}};
  out["verdict"] = name(overall);
  out["seconds"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

}  // namespace foldcheck
