#pragma once
// What every op family of the model runner shares (internal to the model concern): the
// run's values as a kernel sees them (OpRun), the checked shape arithmetic, and the two
// pieces one family lends another (linear for the ConvTranspose of a pair, the pair unit
// for the driver). The contract of a kernel is op_registry.hpp's.
#include <cstdint>
#include <map>
#include <string>
#include <type_traits>
#include <vector>

#include "foldcheck/model/model_run.hpp"
#include "op_registry.hpp"

namespace foldcheck::ops {

// The values of one run in arithmetic T (float: float32 runs, double: float64 runs): the
// graph inputs, the initializers and every value computed so far, with the count of
// elements held (for check_fits_in_memory). The driver (model_run.cpp) walks the graph;
// kernels read and write through here.
template <class T>
class OpRun {
 public:
  static constexpr bool kF64 = std::is_same_v<T, double>;

  OpRun(const Model& m, const ModelRunOptions& o) : m_(m), o_(o) {}

  const Model& model() const { return m_; }
  const ModelRunOptions& options() const { return o_; }
  DType dt() const { return o_.dtype; }
  // A value computed in double, rounded once to T.
  double r(double x) const { return kF64 ? x : static_cast<double>(static_cast<float>(x)); }

  // The value `name` (computed, an initializer, or an integer initializer held as exact
  // doubles); InputError naming `who` if it is not available or its shape and element
  // count disagree.
  const Tensor& get(const std::string& name, const std::string& who);
  // An integer input (shape, pads, axes): every value must be an integer within +-2^62.
  std::vector<std::int64_t> ints(const std::string& name, const std::string& who);
  // A scalar input (Clip's min and max, Pad's value): exactly one element.
  double scalar(const std::string& name, const std::string& who);
  // Stores output k of node n in the run's dtype; InputError when the values held at once
  // would not fit the machine's memory.
  void put(const ModelNode& n, Tensor t, std::size_t k = 0);
  // Stores `t` as output 0 of node n as given (a Constant keeps its own dtype), counted
  // but not checked against memory.
  void put_as_given(const ModelNode& n, Tensor t);
  // InputError when `more` elements besides those held would not fit the machine's memory
  // (checked before an output is built by copies, as Concat's).
  void check_room(std::uint64_t more) const;

 protected:
  void drop(const std::string& name);

  const Model& m_;
  const ModelRunOptions& o_;
  std::map<std::string, Tensor> env_;
  static constexpr std::uint64_t kBytesPerHeldElement = 72;  // 67 measured, with headroom
  std::uint64_t held_ = 0;  // elements of the values held now (env_), for check_fits_in_memory
};

extern template class OpRun<float>;
extern template class OpRun<double>;

// "Conv at node 3 (conv1)": the op, the node's index and its name if it has one.
std::string where(const ModelNode& n, std::size_t i);

// The product of dimensions [from, to) of s (1 when empty).
std::int64_t prod(const Shape& s, std::size_t from = 0, std::size_t to = SIZE_MAX);

// Channel of flat element i of a tensor as a BatchNorm sees it (axis 1; 0 for rank < 2).
struct ChannelOf {
  std::int64_t C = 1, inner = 1;
  explicit ChannelOf(const Shape& s) : C(s.size() > 1 ? s[1] : 1), inner(prod(s, 2)) {}
  std::size_t operator()(std::size_t i) const {
    return static_cast<std::size_t>((static_cast<std::int64_t>(i) / inner) % C);
  }
};

// Checked shape arithmetic: every output dimension of every op is computed through these,
// so a model cannot make a shape wrap around 2^63. InputError naming `where` on overflow.
std::int64_t checked_add(std::int64_t a, std::int64_t b, const std::string& where);
std::int64_t checked_mul(std::int64_t a, std::int64_t b, const std::string& where);

// The one allocation point of every op's output: the shape is checked (no negative
// dimension, no overflow, within the element limit, limits.hpp) BEFORE anything is
// allocated, and the tensor comes back filled with `fill`.
Tensor alloc(const Shape& shape, const std::string& where, double fill = 0.0);

// A spatial output dimension that must hold at least one element: InputError naming the
// node when the (dilated) kernel is larger than the padded input.
std::int64_t positive_dim(std::int64_t d, const std::string& where, const char* axis);

// auto_pad SAME_UPPER / SAME_LOWER: the begin and end padding of one spatial dimension that
// give ceil(in / stride) outputs (the extra padding goes to the end for SAME_UPPER).
void same_padding(const std::string& auto_pad, std::int64_t in, std::int64_t k, std::int64_t stride, std::int64_t dil,
                  std::int64_t& begin, std::int64_t& end);

// Gemm / MatMul / ConvTranspose with explicit parameters (bias per output channel or empty),
// ops_conv.cpp: the node's kernel and the ConvTranspose of a pair. `at` names the node.
// The cotangent of a conv's input from `slices` cotangents of its output (op_registry.hpp's
// Vjp): a conv of the stride-upsampled output cotangent with the flipped, transposed weights,
// run by foldcheck's float32 kernels (a statistic's projection: ~1e-7 relative). InputError for
// a conv padded by more than its dilated kernel.
std::vector<double> conv_input_cotangent(const ref::ConvGeometry& g, const std::vector<double>& w,
                                         const std::vector<double>& gy, std::size_t slices, unsigned threads);

template <class T>
Tensor linear(OpRun<T>& run, const ModelNode& n, const std::string& at, const Tensor& x, const Tensor& w,
              const std::vector<double>& bias);

// A layer -> BatchNormalization pair as one unit (ops_batchnorm.cpp): the layer, then the
// BatchNorm in the policy's form, or the layer with the parameters folded by the recipe;
// the result is the BatchNorm's output.
template <class T>
void run_pair(OpRun<T>& run, const BnPair& p);

}  // namespace foldcheck::ops
