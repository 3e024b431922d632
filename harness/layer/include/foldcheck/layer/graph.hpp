#pragma once
// The graph IR: a chain of nodes over NCHW activations. A conv+BN layer is a two-node
// graph (Conv -> BatchNorm); folding is a pass that rewrites it into Conv [-> ChannelAdd].
//
// Contract: parameters are held exactly in the graph's storage dtype. A Conv produced by
// the fold pass carries FoldInfo: per output channel, the exact fold (scale, bias, and a
// post-conv add for TVM) with the a-priori bound of the recipe's float computation, which
// the bound evaluator uses. Nodes run in order, each consuming the previous output.
#include <optional>
#include <string>
#include <vector>

#include "foldcheck/numerics/bounded.hpp"
#include "foldcheck/numerics/recipes.hpp"
#include "foldcheck/reference/layer.hpp"
#include "foldcheck/numerics/tensor.hpp"

namespace foldcheck {

// How the float BatchNorm node computes (both are used by engines):
//   textbook     y = ((x - mean) / sqrt(var + eps)) * gamma + beta      (ONNX operator spec)
//   scale_shift  a = (1/sqrt(var + eps)) * gamma; y = x * a + (beta - mean * a)
//                (PyTorch CPU and ONNX Runtime inference kernels)
enum class BnForm { Textbook, ScaleShift };
const char* name(BnForm f);
BnForm bn_form_from_name(const std::string& n);

struct FoldInfo {
  Recipe recipe = Recipe::Exact;
  // Per output channel. scale: the weight multiplier t (exact value, error of the float
  // t); weight_alpha/weight_eta: |stored w' - w t| <= alpha |w| + eta for every weight of
  // the channel; bias: the stored folded bias; post_add: TVM's separate shift.
  std::vector<Bounded> scale, bias, post_add;
  std::vector<double> weight_alpha;
  double weight_eta = 0.0;
  bool has_post_add = false;

  // Bound on |stored w' - w * t| for a weight w of output channel o.
  double weight_bound(std::size_t o, double w) const { return round_up(weight_alpha[o] * std::fabs(w) + weight_eta); }
};

struct Node {
  enum class Kind { Conv, BatchNorm, ChannelAdd };
  Kind kind = Kind::Conv;
  std::string name;
  // Conv
  ref::ConvGeometry geometry;
  Tensor weight;
  std::vector<double> bias;  // Conv bias (empty: none) or ChannelAdd addend
  std::optional<FoldInfo> fold;
  std::vector<double> original_bias;  // for a folded conv: the conv bias before folding (empty: none)
  // BatchNorm
  ref::BnParams bn;
};

struct Graph {
  std::vector<Node> nodes;
  DType dtype = DType::Float32;

  const Node* find(Node::Kind k) const;
  std::string describe() const;  // "Conv -> BatchNorm"
};

}  // namespace foldcheck
