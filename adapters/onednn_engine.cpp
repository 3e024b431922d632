// foldcheck-onednn: oneDNN's convolution as a foldcheck engine, in process (the adapter
// protocol: adapters/README.md), a benchdnn-style differential with certified verdicts.
//
//   foldcheck-onednn --recipe R [--algorithm direct|winograd] [--dtype f32|bf16] [--fpmath strict|bf16]
//                    MODEL INPUT OUTDIR
//
// For every Conv -> BatchNormalization pair of MODEL: the layer's input is foldcheck's own
// float32 run of MODEL on INPUT (BatchNorms unfused); the folded weights and bias are those of
// recipe R (foldcheck's replay of that engine's fold, recipes.hpp; TVM's separate shift is
// added after the conv in float32, as TVM does); oneDNN's convolution_forward computes the
// layer with the algorithm asked for. bf16: the input and the folded weights are rounded to
// bfloat16 (oneDNN accumulates in float32, its destination is float32). Written: each conv's
// input (as oneDNN had it, bf16-rounded for bf16) and the layer's output, keyed by layer
// (`layers`: the conv node's name), and in the manifest `fold_recipe`,
// `weight_dtype` and `accumulation`, so the layers are held to that recipe's bounds; under
// Winograd each layer names the transform oneDNN chose (`layers.L.accumulation`: its
// F(2x2,3x3) kernels "winograd_f2x3", its F(4x4,3x3) ones "winograd_f4x3_onednn": interpolation
// points 0, +-5/8, +-3/2, not NNPACK's, a bound of their own). A layer oneDNN
// offers no implementation of the algorithm for (Winograd: 3x3, stride 1, AVX-512) is listed
// in `left_out` with the reason. --fpmath bf16: float32 memory with oneDNN's fpmath_mode bf16
// (its kernels may convert the operands to bf16 and accumulate in float32): the manifest
// declares `arithmetic` "bf16" (a bound that holds whether or not they did); where the CPU has
// no AVX512-BF16 a note says oneDNN computes in float32 here.
// Exit 2 with a message on stderr for bad arguments or a model that cannot run.
#include <dnnl.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "foldcheck/base/errors.hpp"
#include "foldcheck/io/npy.hpp"
#include "foldcheck/layer/fold_pass.hpp"
#include "foldcheck/model/model.hpp"
#include "foldcheck/model/model_patterns.hpp"
#include "foldcheck/model/model_run.hpp"
#include "foldcheck/numerics/dtype.hpp"
#include "foldcheck/numerics/recipes.hpp"

namespace {

using namespace foldcheck;
using json = nlohmann::json;
namespace fs = std::filesystem;

struct Args {
  Recipe recipe = Recipe::OnnxRuntime;
  std::string algorithm = "direct", dtype = "f32", fpmath = "strict", model, input, outdir;
};

Args parse(int argc, char** argv) {
  Args a;
  std::vector<std::string> pos;
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw InputError(s + " needs a value");
      return argv[++i];
    };
    if (s == "--recipe") a.recipe = recipe_from_name(next());
    else if (s == "--algorithm") a.algorithm = next();
    else if (s == "--dtype") a.dtype = next();
    else if (s == "--fpmath") a.fpmath = next();
    else if (s.rfind("--", 0) == 0) throw InputError("unknown option " + s);
    else pos.push_back(s);
  }
  if (pos.size() != 3)
    throw InputError(
        "usage: foldcheck-onednn --recipe R [--algorithm direct|winograd] [--dtype f32|bf16] [--fpmath strict|bf16] "
        "MODEL INPUT OUTDIR");
  if (a.algorithm != "direct" && a.algorithm != "winograd") throw InputError("--algorithm: direct or winograd");
  if (a.dtype != "f32" && a.dtype != "bf16") throw InputError("--dtype: f32 or bf16");
  if (a.fpmath != "strict" && a.fpmath != "bf16") throw InputError("--fpmath: strict or bf16");
  if (a.fpmath == "bf16" && a.dtype != "f32") throw InputError("--fpmath bf16 is for float32 memory (--dtype f32)");
  a.model = pos[0], a.input = pos[1], a.outdir = pos[2];
  return a;
}

// One layer through oneDNN: y = conv(x, w) + bias, NCHW in and out. Empty when oneDNN offers
// no implementation of the algorithm for it; `impl` names the one it chose.
std::vector<double> onednn_conv(const ref::ConvGeometry& g, const std::vector<double>& x, const std::vector<double>& w,
                                const std::vector<double>& bias, const Args& a, std::string& impl) {
  using namespace dnnl;
  using dt = memory::data_type;
  using tag = memory::format_tag;
  engine eng(engine::kind::cpu, 0);
  stream strm(eng);
  const dt in_t = a.dtype == "bf16" ? dt::bf16 : dt::f32;
  const memory::dims src_dims{g.N, g.C, g.H, g.W}, dst_dims{g.N, g.O, g.OH(), g.OW()}, bias_dims{g.O};
  const memory::dims wei_dims = g.groups == 1 ? memory::dims{g.O, g.C, g.KH, g.KW}
                                              : memory::dims{g.groups, g.O / g.groups, g.C / g.groups, g.KH, g.KW};
  const algorithm alg = a.algorithm == "winograd" ? algorithm::convolution_winograd : algorithm::convolution_direct;
  const convolution_forward::desc d(prop_kind::forward_inference, alg, memory::desc(src_dims, in_t, tag::any),
                                    memory::desc(wei_dims, in_t, tag::any), memory::desc(bias_dims, dt::f32, tag::x),
                                    memory::desc(dst_dims, dt::f32, tag::any), {g.stride_h, g.stride_w},
                                    {g.dil_h - 1, g.dil_w - 1}, {g.pad_top, g.pad_left}, {g.pad_bottom, g.pad_right});
  primitive_attr attr;
  if (a.fpmath == "bf16") attr.set_fpmath_mode(fpmath_mode::bf16);
  convolution_forward::primitive_desc pd;
  try {
    pd = convolution_forward::primitive_desc(d, attr, eng);
  } catch (const dnnl::error&) {
    return {};
  }
  impl = pd.impl_info_str();
  std::vector<float> xf(x.begin(), x.end()), wf(w.begin(), w.end()), bf(bias.begin(), bias.end()), yf(g.output_size());
  memory usrc({src_dims, dt::f32, tag::nchw}, eng, xf.data()), uwei({wei_dims, dt::f32, g.groups == 1 ? tag::oihw : tag::goihw}, eng, wf.data()),
      ubias({bias_dims, dt::f32, tag::x}, eng, bf.data()), udst({dst_dims, dt::f32, tag::nchw}, eng, yf.data());
  memory src(pd.src_desc(), eng), wei(pd.weights_desc(), eng), dst(pd.dst_desc(), eng);
  reorder(usrc, src).execute(strm, usrc, src);  // to bf16: round to nearest even (exact: the values are bf16 already)
  reorder(uwei, wei).execute(strm, uwei, wei);
  convolution_forward(pd).execute(strm, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_BIAS, ubias}, {DNNL_ARG_DST, dst}});
  reorder(dst, udst).execute(strm, dst, udst);
  strm.wait();
  return std::vector<double>(yf.begin(), yf.end());
}

// A layer's key in the manifest: its conv node's name, or its output's when it has none.
std::string key_of(const Model& m, const BnPair& p) {
  const ModelNode& n = m.nodes[p.layer];
  return n.name.empty() ? n.outputs.at(0) : n.name;
}

// The float32 values as an .npy named by its index; the file name.
std::string save(const fs::path& dir, std::size_t k, const Shape& shape, const std::vector<double>& v) {
  const std::string f = "value_" + std::to_string(k) + ".npy";
  write_npy((dir / f).string(), Tensor{shape, v, DType::Float32});
  return f;
}

int run(const Args& a) {
  const Model m = Model::load(a.model);
  const BnPatterns pat = find_bn_pairs(m);
  const Tensor x0 = model_input(m, a.input, 0);
  ModelRunOptions ro;
  for (const BnPair& p : pat.pairs) ro.keep.insert(m.nodes[p.layer].inputs.at(0));
  const auto acts = run_model(m, pat, {{m.inputs.at(0).name, x0}}, ro);
  const DType wdt = a.dtype == "bf16" ? DType::BFloat16 : DType::Float32;
  Arithmetic ar;
  if (a.dtype == "bf16") ar.weight_dtype = DType::BFloat16;
  fs::create_directories(a.outdir);
  json layers = json::object(), notes = json::array(), left_out = json::object();
  std::map<std::string, int> impls;
  std::size_t files = 0;
  for (const BnPair& p : pat.pairs) {
    if (m.nodes[p.layer].op != "Conv") {  // reported, not judged: this adapter runs oneDNN's convolutions only
      left_out[key_of(m, p)] = "foldcheck-onednn runs oneDNN convolutions only, not a " + m.nodes[p.layer].op;
      continue;
    }
    Tensor x = acts.at(m.nodes[p.layer].inputs[0]);
    for (double& v : x.data) v = round_to(wdt, v);
    const LayerParams lp = layer_params(m, p);
    const Graph g = fold_batchnorm(pair_graph(m, p, lp, x, DType::Float32), a.recipe, {}, ar);
    const Node& c = g.nodes[0];
    std::vector<double> bias = c.bias;
    bias.resize(static_cast<std::size_t>(c.geometry.O), 0.0);
    std::string impl;
    std::vector<double> y = onednn_conv(c.geometry, x.data, c.weight.data, bias, a, impl);
    if (y.empty()) {
      left_out[key_of(m, p)] = "oneDNN offers no " + a.algorithm + " " + a.dtype + " convolution for this layer";
      continue;
    }
    // The transform oneDNN chose for this layer: its F(2x2,3x3) kernels (wino_2x3) or its
    // F(4x4,3x3) ones (wino_4x3, wino_reorder_4x3), at its own interpolation points;
    // foldcheck bounds both (winograd_bound.hpp).
    std::string accumulation = "direct";
    if (a.algorithm == "winograd") {
      if (impl.find("wino_2x3") != std::string::npos) accumulation = "winograd_f2x3";
      else if (impl.find("4x3") != std::string::npos) accumulation = "winograd_f4x3_onednn";
      else {
        left_out[key_of(m, p)] = "oneDNN chose " + impl + ", a Winograd kernel of a transform foldcheck does not know";
        ++impls[impl];
        continue;
      }
    }
    ++impls[impl];
    if (g.nodes.size() > 1 && g.nodes[1].kind == Node::Kind::ChannelAdd) {  // TVM's shift, after the conv
      const std::int64_t plane = c.geometry.OH() * c.geometry.OW();
      for (std::size_t i = 0; i < y.size(); ++i)
        y[i] = static_cast<float>(static_cast<float>(y[i]) + static_cast<float>(g.nodes[1].bias[(i / plane) % c.geometry.O]));
    }
    // Keyed by layer, not by value: each layer runs on foldcheck's activation, so its input
    // and the previous layer's output (one value name in a linear bottleneck) differ.
    layers[key_of(m, p)] = {{"input", save(a.outdir, files++, x.shape, x.data)},
                            {"output", save(a.outdir, files++,
                                            {c.geometry.N, c.geometry.O, c.geometry.OH(), c.geometry.OW()}, y)},
                            {"accumulation", accumulation}};
  }
  for (const auto& [impl, n] : impls) notes.push_back("implementation " + impl + ": " + std::to_string(n) + " layer(s)");
  const auto bf16_isa = static_cast<unsigned>(dnnl::cpu_isa::avx512_core_bf16);
  if (a.fpmath == "bf16" && (static_cast<unsigned>(dnnl::get_effective_cpu_isa()) & bf16_isa) != bf16_isa)
    notes.push_back(
        "fpmath_mode bf16: this CPU has no AVX512-BF16, so oneDNN computes these convolutions in float32 "
        "(held to the bf16 bound all the same: it covers them)");
  const json man{{"protocol", 1},
                 {"engine", "onednn " + std::to_string(dnnl_version()->major) + "." +
                                std::to_string(dnnl_version()->minor) + "." + std::to_string(dnnl_version()->patch) +
                                " (" + a.algorithm + ", " + a.dtype + (a.fpmath == "bf16" ? ", fpmath bf16" : "") +
                                ", fold: " + name(a.recipe) + ")"},
                 {"values_of", "model"},
                 {"fold_recipe", name(a.recipe)},
                 {"weight_dtype", a.dtype == "bf16" ? "bfloat16" : "float32"},
                 {"outputs", json::object()},
                 {"layers", layers},
                 {"left_out", left_out},
                 {"accumulation", "direct"},  // each layer names its own (Winograd: the transform oneDNN chose)
                 {"arithmetic", a.fpmath == "bf16" ? "bf16" : "float32"},
                 {"notes", notes}};
  std::ofstream(fs::path(a.outdir) / "manifest.json") << man.dump(1) << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse(argc, argv));
  } catch (const std::exception& e) {
    std::cerr << "foldcheck-onednn: " << e.what() << "\n";
    return 2;
  }
}
