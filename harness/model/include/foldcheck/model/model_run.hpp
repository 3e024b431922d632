#pragma once
// Running a model (model.hpp) end to end in one arithmetic: float32 (every op computes in
// float32 and rounds its results to float32, as engines do) or float64.
//
// Contract: nodes run in file order. A layer -> BatchNormalization pair (model_patterns.hpp)
// runs as one unit: unfused (the layer, then the BatchNorm in the policy's form) or fused
// (the layer with the parameters folded by `recipe`, fold_pass.hpp). Convs use foldcheck's
// conv path (evaluate.hpp: (c, kh, kw) sequential accumulation unless the policy says
// otherwise); Gemm/MatMul accumulate sequentially over k; pooling sums sequentially and
// divides once; element-wise ops round once per operation (HardSigmoid and HardSwish once per
// multiply, add and product); Sigmoid is evaluated in double and rounded once. Results do
// not depend on the thread count.
// Unsupported ops throw InputError "unsupported op X at node N".
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "foldcheck/layer/evaluate.hpp"
#include "foldcheck/model/model.hpp"
#include "foldcheck/model/model_patterns.hpp"
#include "foldcheck/numerics/recipes.hpp"

namespace foldcheck {

struct ModelRunOptions {
  DType dtype = DType::Float32;  // Float32 or Float64
  bool fused = false;
  Recipe recipe = Recipe::PyTorch;
  Policy policy;               // conv accumulation order, BatchNorm form
  ref::Options ref;            // the exact fold, when recipe is Exact
  std::set<std::string> keep;  // values to return besides the graph outputs
  std::function<void(std::size_t done, std::size_t total)> progress;
  // Called after every node that computes a value, in node order on the calling thread,
  // with the node's index, its input tensors and its (first) output, which it may change
  // before later nodes read it. A layer -> BatchNorm pair calls it once, with the
  // BatchNorm's index, the layer's input and the BatchNorm's output. (The Monte Carlo
  // error model of output_bound.hpp records and perturbs the values here.)
  std::function<void(std::size_t node, const std::vector<const Tensor*>& inputs, Tensor& output)> after_node;
};

// InputError naming the first node the runner cannot compute as the ONNX spec defines it:
// an op it does not implement, an attribute it does not read (even at its default value),
// or a value it does not support (training-mode or per-activation BatchNorm, MaxPool
// indices, non-constant Pad, ConvTranspose auto_pad/output_shape, a kernel_shape that
// disagrees with the weight, ...). run_model calls it first.
void check_supported(const Model& m);
// InputError naming the first node whose attributes break the ONNX operator spec (group
// < 1, a kernel dimension < 1, an output_padding not below the stride, a pooling pad not
// below the kernel, a flag other than 0 or 1, an attribute that is an input at the model's
// opset, ...) or whose inputs break its type constraints (an INT64 or BOOL tensor added to
// a float one, a float tensor as Reshape's shape): an invalid model, not a limitation of
// foldcheck. check_supported calls it.
void check_attributes(const Model& m);

// inputs: every graph input by name (values of the run's dtype). Returns the graph
// outputs and the kept values.
std::map<std::string, Tensor> run_model(const Model& m, const BnPatterns& pairs,
                                        const std::map<std::string, Tensor>& inputs, const ModelRunOptions& opts);

// The model's single input: the given .npy (InputError for NaN/Inf, a value that is not a
// dt value, or a shape that does not fit the graph input), or seeded standard-normal
// values rounded to dt, of the graph input's shape (an unknown leading dimension is 1,
// others are refused). Batch::Free: a file may also hold a batch of the model's inputs, its
// leading dimension a multiple of the graph's fixed one (a batch-1 model given 8 images): the
// runs then take the batch at once, as one run per item would (the caller checks that the
// output's leading dimension grew alike: batch_output_mismatch).
enum class Batch { AsDeclared, Free };
Tensor model_input(const Model& m, const std::optional<std::string>& input, std::uint64_t seed,
                   DType dt = DType::Float32, Batch batch = Batch::AsDeclared);
// For a Batch::Free input x: why the model's output `y` is not that batch's outputs (its leading
// dimension did not grow by the input's factor: a node mixed the items, a Reshape fixed the
// batch), or "" when it is (or x is the declared batch).
std::string batch_output_mismatch(const Model& m, const Tensor& x, const Tensor& y);

// The node's op evaluated in float64 on the absolute values of its inputs and floating
// parameters: for a linear op (Conv, ConvTranspose, Gemm, MatMul, AveragePool,
// GlobalAveragePool) the magnitude sum |w_k x_k| (+ |bias|) of every output, what rounding
// errors of the sum scale with (AveragePool: sum |x_k| / count). `inputs` are the node's
// non-initializer inputs by name.
Tensor magnitude(const Model& m, std::size_t node, const std::map<std::string, Tensor>& inputs);

// A linear layer's (Conv, ConvTranspose, Gemm, MatMul with an initializer weight) response to a
// change dx of its first input: the node alone, without its bias, run in float64 on dx (its
// other non-initializer inputs, if any, as given in `inputs`). The end-to-end bound feeds it the
// conversion error of the layer's own input (output_bound.hpp).
Tensor linear_response(const Model& m, std::size_t node, const Tensor& dx);

// The conv geometry of a Conv node on an input of shape [N, C, H, W] (auto_pad resolved).
ref::ConvGeometry conv_geometry(const ModelNode& n, const Shape& input_shape, const Shape& weight_shape);

// A Conv, Gemm or MatMul node as a graph Conv node of dtype dt, with the parameters `lp`
// (layer_params_of_node or layer_params) rounded to dt. A Gemm or MatMul is a 1x1 conv over
// its rows: x is reshaped to [rows, K, 1, 1] (transposed first for Gemm's transA); the
// same operations in the same order (k-sequential products, then the bias).
Node layer_as_conv(const Model& m, std::size_t layer, LayerParams lp, Tensor& x, DType dt);
// The layer -> BatchNorm pair as the two-node graph fold_pass and evaluate take (x as above).
// InputError for a MatMul whose input is not 2-D (its BatchNorm would scale rows, not features).
Graph pair_graph(const Model& m, const BnPair& p, LayerParams lp, Tensor& x, DType dt);
// The shape of layer's output as the model has it, from the conv's output and the
// layer's input shape.
Shape layer_output_shape(const ModelNode& layer, const ref::ConvGeometry& g, const Shape& input_shape);

}  // namespace foldcheck
