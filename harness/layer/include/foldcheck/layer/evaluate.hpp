#pragma once
// Evaluation of a graph under an arithmetic policy, and its deterministic error bound.
//
// Contract (evaluate): every node computes in the storage dtype's arithmetic type
// (float32 for float32/float16/bfloat16, float64 for float64) exactly the operations
// described, and rounds its output to the storage dtype. The conv accumulates the
// products of in-bounds positions in (c, kh, kw) order, sequentially or pairwise, then
// adds its bias with one more rounding (orders and Winograd: conv_kernels.hpp). The
// policy's Arithmetic (fma, fast rsqrt) applies to every operation it names. Results do
// not depend on the thread count.
//
// Contract (deterministic_bound): for each output element, a rigorous bound on
// |evaluate(...) - exact value of the original unfused layer|, from the a-priori analysis
// (Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed., 3.1): the conv's
// accumulated error is at most gamma_k * (sum|x_i w_i| + |b|), where k is the number of
// roundings a term can suffer (sequential: n products and additions + 1 for the bias;
// pairwise: ceil(log2 n) + 1 + 1; blocked with K-block b: min(b, n) + ceil(n/b) + 1),
// plus the weights' and bias' own fold errors, then the BatchNorm or post-add chain in
// Bounded arithmetic (bounded.hpp). Winograd is not a dot product in the original terms:
// its transforms add and subtract inputs before multiplying, so its bound is
// gamma_k * W(|x|, |w|), where W is the same F(2x2,3x3) computation on absolute values
// with |G|, |B^T|, |A^T| (the standard bound for a straight-line program of + and x:
// each monomial of the expanded result carries at most k rounding factors, k = the
// longest chain: 4 filter-transform + 2 data-transform roundings, 1 product, C/groups
// channel sums, 4 output-transform roundings, + 1 for the bias).
#include <cstdint>
#include <string>
#include <vector>

#include "foldcheck/reference/conv_bn_reference.hpp"
#include "foldcheck/numerics/arithmetic.hpp"
#include "foldcheck/layer/graph.hpp"
#include "foldcheck/layer/order.hpp"

namespace foldcheck {

struct Policy {
  Order order;
  BnForm bn_form = BnForm::Textbook;
  unsigned threads = 0;  // 0: hardware concurrency
  Arithmetic arith;      // fma / fast rsqrt in the conv and BatchNorm nodes
  // Nonzero: every conv sums its input channels in an order permuted within each group, by a
  // generator seeded with this value (honest samples of a layer or a model: honest_samples.hpp,
  // model/output_band.hpp). The same products, another order of the sum.
  std::uint64_t permute = 0;
};

std::vector<double> evaluate(const Graph& g, const std::vector<double>& x, const Policy& p);

// Number of roundings a product term of a conv (plus bias) can suffer in this order.
double accumulation_roundings(const Order& o, const ref::ConvGeometry& g, bool has_bias);
// Upper bound on W(|x|, |w|) of every output (see above), NCHW; for Winograd bounds.
std::vector<double> winograd_magnitudes(const ref::ConvGeometry& g, const std::vector<double>& x,
                                        const std::vector<double>& w);

struct BoundReport {
  std::vector<double> bound;          // per output element, absolute (deterministic)
  std::string formula;                // human-readable statement of the bound used
  // Probabilistic variant (Higham & Mary, SIAM J. Sci. Comput. 41(5), 2019, Thm 3.1):
  // with independent mean-zero rounding errors, an n-term dot product satisfies
  // |s^ - s| <= gt_n(lambda) sum|x_i y_i|, gt_n(lambda) = exp(lambda sqrt(n) u + n u^2/(1-u)) - 1,
  // with probability >= 1 - 2n exp(-lambda^2 (1-u)^2 / 2). lambda is chosen so that, by a
  // union bound over all N outputs, the chance that any output of a correct computation
  // exceeds it is at most 1 - confidence. Only the accumulation term uses this model; the
  // few fold/BatchNorm roundings keep their deterministic bound.
  std::vector<double> probabilistic;  // empty unless requested
  double lambda = 0.0, confidence = 0.0;
};
// x: the graph's input, needed for Winograd (std::invalid_argument if missing then).
BoundReport deterministic_bound(const Graph& g, const ref::LayerResult& exact, const Policy& p,
                                const std::vector<double>* x = nullptr);
// Deterministic and probabilistic bounds together (confidence in (0, 1)).
BoundReport error_bounds(const Graph& g, const ref::LayerResult& exact, const Policy& p, double confidence,
                         const std::vector<double>* x = nullptr);

// gt_k(lambda) and the lambda for k-term sums over n_outputs outputs at `confidence`.
double gamma_tilde(double k, double u, double lambda);
double lambda_for(double k, double n_outputs, double u, double confidence);

}  // namespace foldcheck
