// The pass pipeline (passes.hpp).
#include "foldcheck/layer/passes.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "foldcheck/base/errors.hpp"
#include "foldcheck/layer/fold_pass.hpp"

namespace foldcheck {

namespace {

bool has_bn(const Graph& g) { return g.find(Node::Kind::BatchNorm) != nullptr; }

std::vector<PassInfo> make_passes() {
  std::vector<PassInfo> p;
  p.push_back({"SimplifyInference", 0, "BatchNorm -> multiply + add",
               [](Lowering& l, const Graph& g) -> std::string {
                 if (!has_bn(g)) return "no BatchNorm";
                 l.scale_shift = true;
                 return "";
               }});
  p.push_back({"FoldConstant", 2, "constant subexpressions evaluated at compile time (float32, IEEE)",
               [](Lowering& l, const Graph&) -> std::string {
                 l.constants_folded = true;
                 return "";
               }});
  p.push_back({"FoldScaleAxis", 3, "the per-channel multiply folded into the conv weights and bias",
               [](Lowering& l, const Graph& g) -> std::string {
                 if (!has_bn(g)) return "no BatchNorm";
                 if (!l.scale_shift) return "no multiply to fold (SimplifyInference has not run)";
                 l.folded = true;
                 return "";
               }});
  p.push_back({"SimplifyExpr", 2, "x / sqrt(a) -> x * (1/sqrt(a))",
               [](Lowering& l, const Graph&) -> std::string {
                 l.rsqrt_multiply = true;
                 return "";
               }});
  p.push_back({"FastMath", 4, "runtime 1/sqrt -> 12-bit hardware estimate",
               [](Lowering& l, const Graph& g) -> std::string {
                 if (!has_bn(g)) return "no BatchNorm";
                 if (l.constants_folded) return "the 1/sqrt is already a folded constant";
                 l.fast_rsqrt = true;
                 return "";
               }});
  p.push_back({"FuseOps", 1, "the conv's per-channel add moved into its epilogue (bias + add at compile time)",
               [](Lowering& l, const Graph&) -> std::string {
                 if (!l.folded) return "no separate add after the conv";
                 l.fuse_epilogue = true;
                 return "";
               }});
  p.push_back({"AlterOpLayout", 3, "NCHW16c: accumulation in K-blocks of 16",
               [](Lowering& l, const Graph&) -> std::string {
                 if (l.winograd) return "Winograd already chosen";
                 l.blocked = true;
                 return "";
               }});
  p.push_back({"Winograd", 3, "F(2x2,3x3) convolution",
               [](Lowering& l, const Graph& g) -> std::string {
                 try {
                   check_order(Order(Accumulation::Winograd), g.nodes.at(0).geometry);
                 } catch (const InputError& e) {
                   return e.what();
                 }
                 l.winograd = true;
                 l.blocked = false;
                 return "";
               }});
  p.push_back({"Quantize", -1, "int8 weights (per channel) and input (per tensor), power-of-two scales",
               [](Lowering& l, const Graph&) -> std::string {
                 l.quantized = true;
                 return "";
               }});
  return p;
}

// Symmetric int8 with a power-of-two scale: the smallest 2^k with max|v| / 2^k <= 127;
// v -> round(v / 2^k) * 2^k, exact in any binary format that holds v.
void quantize_int8(double* v, std::size_t n) {
  double m = 0;
  for (std::size_t i = 0; i < n; ++i) m = std::max(m, std::fabs(v[i]));
  if (m == 0) return;
  const int k = static_cast<int>(std::ceil(std::log2(m / 127.0)));
  const double s = std::ldexp(1.0, k);
  for (std::size_t i = 0; i < n; ++i) v[i] = std::clamp(std::nearbyint(v[i] / s), -127.0, 127.0) * s;
}

}  // namespace

const std::vector<PassInfo>& all_passes() {
  static const std::vector<PassInfo> passes = make_passes();
  return passes;
}

const PassInfo& pass_named(const std::string& name) {
  for (const PassInfo& p : all_passes())
    if (p.name == name) return p;
  std::string names;
  for (const PassInfo& p : all_passes()) names += (names.empty() ? "" : ", ") + p.name;
  throw InputError(fmt::format("unknown pass '{}' (passes: {})", name, names));
}

std::vector<std::string> pipeline_for(int opt_level, const std::vector<std::string>& disabled) {
  for (const std::string& d : disabled) pass_named(d);
  std::vector<std::string> r;
  for (const PassInfo& p : all_passes())
    if (p.opt_level >= 0 && p.opt_level <= opt_level && std::find(disabled.begin(), disabled.end(), p.name) == disabled.end())
      r.push_back(p.name);
  return r;
}

Lowering lower(const Graph& layer, const std::vector<std::string>& passes, std::size_t count) {
  Lowering l;
  for (std::size_t i = 0; i < count && i < passes.size(); ++i) {
    const PassInfo& p = pass_named(passes[i]);
    const std::string why = p.apply(l, layer);
    if (why.empty()) l.applied.push_back(p.name);
    else l.skipped.push_back(p.name + ": " + why);
  }
  return l;
}

Realized realize(const Lowering& l, const Graph& layer, const std::vector<double>& x, const ref::Options& ref, bool ieee) {
  Realized r;
  r.input = x;
  r.policy.bn_form = l.scale_shift ? BnForm::ScaleShift : BnForm::Textbook;
  r.policy.arith.rsqrt_multiply = l.rsqrt_multiply;
  if (l.fast_rsqrt && !ieee) r.policy.arith.newton_steps = 0;
  if (l.blocked) r.policy.order = Order(Accumulation::Blocked, 16);
  if (l.winograd) r.policy.order = Order(Accumulation::Winograd);
  std::vector<std::string> how;
  how.push_back(l.folded ? "conv with BatchNorm folded (TVM recipe)" : std::string("conv, then BatchNorm (") + name(r.policy.bn_form) + ")");
  r.graph = l.folded ? fold_batchnorm(layer, Recipe::Tvm, ref, r.policy.arith) : layer;
  if (l.fuse_epilogue && r.graph.nodes.size() > 1 && r.graph.nodes[1].kind == Node::Kind::ChannelAdd) {
    Node& conv = r.graph.nodes[0];
    const Node& add = r.graph.nodes[1];
    const DType a = info(r.graph.dtype).arithmetic;
    for (std::size_t o = 0; o < conv.bias.size(); ++o) {
      conv.bias[o] = round_to(r.graph.dtype, round_to(a, conv.bias[o] + add.bias[o]));
      if (conv.fold) conv.fold->bias[o] = (conv.fold->bias[o] + conv.fold->post_add[o]).stored_as(r.graph.dtype);
    }
    if (conv.fold) {
      conv.fold->has_post_add = false;
      conv.fold->post_add.clear();
    }
    r.graph.nodes.erase(r.graph.nodes.begin() + 1);
    how.push_back("shift fused into the conv bias");
  }
  if (l.quantized) {
    Node& conv = r.graph.nodes[0];
    const std::size_t per = static_cast<std::size_t>(conv.geometry.terms_per_output());
    for (std::size_t o = 0; o * per < conv.weight.data.size(); ++o) quantize_int8(&conv.weight.data[o * per], per);
    quantize_int8(r.input.data(), r.input.size());
    how.push_back("int8 weights and input");
  }
  how.push_back("accumulation " + r.policy.order.label());
  if (r.policy.arith.multiplies_by_rsqrt()) how.push_back("1/sqrt " + r.policy.arith.label());
  for (const std::string& h : how) r.note += (r.note.empty() ? "" : "; ") + h;
  return r;
}

}  // namespace foldcheck
