#pragma once
// An end-to-end bound on the outputs of a model evaluated in float32 by any engine that
// folds (or does not fold) its BatchNorms: what `accuracy-diff --observed-output` checks
// another engine's outputs against.
//
// Why not a deterministic bound: composing per-layer worst cases multiplies every layer's
// l1 gain; on ResNet-18 that exceeds 1e28 ULP, vacuous. The bound here is probabilistic,
// in the model of Higham & Mary (SIAM J. Sci. Comput. 41(5), 2019): every rounding error
// is independent and mean-zero, |delta| <= u.
//
// The model of the engine (u = 2^-24, float32 activations):
//  - each output i of an op has a local error, a sum of individual roundings; b_i bounds
//    the root of the sum of their squared bounds (the variance proxy of Hoeffding's
//    inequality), whatever the summation order (no Winograd/FFT):
//      layer -> BatchNorm (folded or not):  b^2 = (n+1) u^2 (|s| M + |b'|)^2 + 3 u^2 (|y| + |beta|)^2
//        (n terms, M = sum |w x| + |conv bias|, s = gamma / sqrt(var + eps), b' the
//        folded bias; the second term: the unfused BatchNorm's subtract, multiply, add)
//      Conv/ConvTranspose/Gemm/MatMul alone:  b = sqrt(n+1) u M
//      AveragePool (k-window):  b = sqrt(k+1) u A,  GlobalAveragePool: sqrt(k+2) u A
//        (A = mean |x|; the sum's roundings, the division or the multiply by 1/k)
//      BatchNormalization alone:  b = sqrt(3) u (|y| + |beta|)
//      Add, Sub, Mul, Div, LeakyRelu: b = u |y|;  Sigmoid: 4 u |y| (a library exp,
//        1 + e, a division: an allowance of 4 roundings);  HardSigmoid: u (2|a x| + |b|);
//        HardSwish: |x| u (2|a x| + |b|) + u |y|
//      Relu, MaxPool, Clip, Identity, Reshape, Flatten, (Un)Squeeze, Concat, Pad: exact.
//  - each fold rounding is a perturbation of a parameter, shared by every output that
//    uses it: every BatchNorm's scale by (1 + 4 u_w g_c) per channel (the eps add, square
//    root, reciprocal or division, and the product with gamma; eps held in float32), each
//    folded weight by (1 + u_w g) (w x scale), and a folded bias by 3 u_w |(b - mu) s| +
//    u_w |b'| (subtract, one or two products, add); u_w is the weight dtype's.
//
// The engine's arithmetic (OutputBoundOptions::operands, storage), for engines that do not
// compute in float32 (torch.autocast, mixed precision):
//  - operands converted to a p-bit format before every Conv/ConvTranspose/Gemm/MatMul
//    (nearest, |delta| <= u_op = 2^-p, mean zero): each weight a parameter perturbation
//    (1 + u_op g), shared by every output that uses it, and the graph input likewise (the
//    first layer converts it); with 16-bit activations also each layer's bias (autocast
//    converts it) and a folded bias b' by u_op |b'|;
//    A value below the format's normal range is rounded absolutely: each amplitude u |v| gains
//    eta = 2^(emin - p) (fp16: 2^-25; bf16: 2^-133).
//  - activations stored in a 16-bit type (u_s): every op that computes a value (each one with
//    a local error above) rounds it to the type once more, b^2 += (u_s |y| + eta_s)^2; a layer ->
//    BatchNorm pair whose engine does not fold rounds the conv's output too,
//    b^2 += (u_s (|y| + |beta| + |s mu|) + eta_s)^2 (|s c| = |y - beta + s mu|; its eta_s taken
//    unscaled: an allowance, the scale s is not charged on it). With 16-bit
//    activations every op's input is already a value of the type, so converting it again
//    is exact. With float32 activations (TF32 tensor cores, bf16/fp16 operands of a float32
//    model) each layer's input conversion is seen by that layer alone: dx = u_op |x| g, the
//    layer's linear response to dx added to its output (times the BatchNorm's scale for a
//    pair) in each perturbed run. A MatMul of two activations is not modelled (its second
//    operand's conversion): such models are judged as if it were exact.
//
// First-order propagation: the output error is e_j = sum_i J_ji d_i over every local
// error d_i (J: the network's derivative at the exact values), so by Hoeffding
// P(|e_j| > lambda sqrt(S_j)) <= 2 exp(-lambda^2 / 2) with S_j = sum_i J_ji^2 b_i^2. S_j is
// estimated by K float64 runs that add b_i g_i (g_i standard normal) to every local
// output and parameter: each run's deviation from the unperturbed float64 run is
// N(0, S_j) to first order, so the mean of K squares, S^_j, is S_j chi^2_K / K, and
// P(S_j > c S^_j) <= (x e^(1-x))^(K/2), x = 1/c (Chernoff). With m outputs, lambda and c are
// chosen so that m * 2 exp(-lambda^2/2) and m * (x e^(1-x))^(K/2) are each at most
// (1 - confidence) / 2: a correct engine exceeds
//     bound_j = lambda sqrt(c S^_j) (1 + 2^-29)
// anywhere with probability at most 1 - confidence. The factor 1 + 2^-29 covers the
// float64 reference run, whose roundings follow the same model with u = 2^-53.
// Results depend on the seed, not on the thread count.
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "foldcheck/model/model.hpp"
#include "foldcheck/model/model_patterns.hpp"
#include "foldcheck/numerics/conv_arithmetic.hpp"

namespace foldcheck {

struct OutputBoundOptions {
  std::size_t samples = 32;  // K
  double operand_u = 0;      // u_op of the layers' converted operands (0: float32 as given)
  double operand_eta = 0;    // ... and their absolute error below the format's normal range
  double storage_u = 0;      // u_s of 16-bit activations (0: float32 activations)
  double storage_eta = 0;    // ... and their absolute error below its normal range (fp16: 2^-25)
  std::uint64_t seed = 0;
  double confidence = 0.999;
  unsigned threads = 0;  // conv evaluation (0: all cores)
  std::function<void(std::size_t done, std::size_t total)> progress;  // per sample
};

struct OutputBound {
  std::map<std::string, Tensor> reference;            // the unperturbed float64 run's outputs
  std::map<std::string, std::vector<double>> sigma;   // sqrt(S^_j) per output element
  std::map<std::string, std::vector<double>> bound;   // lambda sqrt(c S^_j) (1 + 2^-29)
  double lambda = 0, inflation = 0;                   // lambda and sqrt(c)
  std::size_t samples = 0, outputs = 0;
  std::uint64_t seed = 0;
  double confidence = 0;
  std::string formula;
};

// inputs: every graph input by name (float32 values). Throws InputError for a model the
// runs cannot take (model_run.hpp).
OutputBound output_bound(const Model& m, const BnPatterns& pairs, const std::map<std::string, Tensor>& inputs,
                         const OutputBoundOptions& opts);

// The options' arithmetic for an engine computing in `a` (numerics/conv_arithmetic.hpp):
// nothing for float32; for an operand format its u_op and eta_op, and, when stored16 (every
// observed value is a value of the format: activations stored in it, torch.autocast), the
// same as u_s and eta_s; otherwise float32 activations (each layer's input conversion
// modelled). TF32 keeps float32 activations. bf16x3 and fp16 accumulation are not modelled
// end to end: InputError, naming diagnose.
void set_end_to_end_arithmetic(const ConvArithmetic& a, bool stored16, OutputBoundOptions& o);

// The lambda and sqrt(c) above for m outputs, K samples and a confidence.
void output_bound_factors(double m, std::size_t samples, double confidence, double& lambda, double& inflation);

}  // namespace foldcheck
