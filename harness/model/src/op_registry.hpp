#pragma once
// The op registry (internal to the model concern): every ONNX op the model runner computes,
// in ONE table. The runner (run_model, model_run.cpp) dispatches through it; the support
// and spec checks (check_supported and check_attributes, model_support.cpp) and the
// loader's arity check (Model::parse, onnx_model.cpp) read their per-op rules from it. An
// op the table does not hold is refused by name everywhere ("unsupported op X at node N").
//
// The table is assembled from one part per op family (ops_FAMILY.cpp: conv, batchnorm,
// elementwise, pool, shape), each beside its kernels. Adding an op = one entry in its
// family's table + its kernel in the same file; no other list names it.
//
// Contract of an entry (OpEntry):
// - attributes: every attribute the kernel reads. check_supported refuses a node setting
//   any other, even at its default value (it would mean an opset or an extension foldcheck
//   does not model): never run with an attribute silently ignored.
// - arity: the ONNX spec's input and output counts. The minimums are checked when a model
//   is loaded (a required input may not be omitted as ""), the maximums by
//   check_attributes; kAny: no maximum (Concat).
// - spatial, integer_inputs, passes_type, moved: what check_attributes applies to the op
//   (the 2-D conv or pooling attribute rules; the INT64 inputs (shapes, pads, axes); an
//   output of its data input's type, of any type; attributes that became inputs at an opset).
// - kernel: computes one node in the run's arithmetic, instantiated for float (float32
//   runs) and double (float64 runs); `run(OpRun<T>&, node, index)` (ops_common.hpp). It gets
//   a node check_supported accepted (only the listed attributes, in their ranges; the types
//   of its inputs checked) and the run's values; it
//     - reads its inputs through OpRun::get / ints / scalar (InputError naming the node for
//       a value that is missing, not a list of integers or not one element);
//     - derives its output shape from the inputs and attributes in checked arithmetic
//       (checked_add, checked_mul, positive_dim) and allocates it through alloc (the
//       element limit) BEFORE computing anything: a shape is refused before memory is taken.
//       There is no separate shape function: nothing needs a shape without the values, and
//       computing it apart would reorder the checks and their messages;
//     - refuses what it cannot compute with an InputError naming where(node, index);
//     - stores its output with OpRun::put (the run's dtype, the memory held checked);
//     - rounds as model_run.hpp's contract says: every operation in T, once per operation,
//       in a fixed order (parameters rounded to the run's dtype as they are read (round_to);
//       sums accumulated sequentially in T; a value evaluated in double, e.g. Sigmoid,
//       rounded once with OpRun::r), so the outputs hold T values and do not depend on the
//       thread count.
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include "foldcheck/model/model.hpp"

namespace foldcheck::ops {

template <class T>
class OpRun;  // the run's values, as a kernel sees them (ops_common.hpp)

// A kernel for both arithmetics: {&k<float>, &k<double>} for a function template k.
struct Kernel {
  void (*f32)(OpRun<float>&, const ModelNode&, std::size_t) = nullptr;
  void (*f64)(OpRun<double>&, const ModelNode&, std::size_t) = nullptr;

  template <class T>
  void run(OpRun<T>& run, const ModelNode& n, std::size_t i) const {
    if constexpr (std::is_same_v<T, double>) f64(run, n, i);
    else f32(run, n, i);
  }
};

inline constexpr std::size_t kAny = SIZE_MAX;  // no maximum count

struct OpArity {
  std::size_t min_inputs = 0, min_outputs = 0;  // present ("" is not) when loaded
  std::size_t max_inputs = kAny, max_outputs = kAny;
};

// The 2-D spatial attributes the op has (strides, dilations, pads, kernel_shape, auto_pad,
// and a conv's group and output_padding, a pool's required kernel_shape).
enum class Spatial { None, Conv, Pool };

// Attributes that became inputs at opset `since` (Clip min/max at 11, Pad pads/value at 11,
// Squeeze/Unsqueeze axes at 13): before it the op takes at most max_inputs_before inputs,
// from it max_inputs_after.
struct MovedToInputs {
  std::int64_t since = 0;
  std::vector<const char*> attrs;
  std::size_t max_inputs_before = 0, max_inputs_after = 0;
};

// The transposed derivative of one node at a float64 run's values (model/model_vjp.hpp: the
// calibrated band of a model's outputs projects an output error back to every layer with it).
// `slices` cotangents of output 0 come in gy (slices x its elements); each is multiplied by the
// transposed Jacobian of the node with respect to input k and ADDED to gx[k] (slices x that
// input's elements; null: input k is a parameter, or nothing needs it). Linear in gy, exact up
// to the arithmetic it runs in (double, convs in float32: a statistic, not a bound); the same
// values for any thread count. A null vjp: models with the op have no band.
struct VjpArgs {
  const ModelNode& node;
  std::size_t index = 0;
  std::int64_t opset = 0;
  std::vector<const Tensor*> inputs;  // each input's value at the run (null: omitted)
  const Tensor* output = nullptr;     // output 0's value
  std::size_t slices = 1;
  unsigned threads = 0;
};
using Vjp = void (*)(const VjpArgs&, const std::vector<double>& gy, const std::vector<std::vector<double>*>& gx);

struct OpEntry {
  std::set<std::string> attributes;
  OpArity arity;
  Kernel kernel;
  Spatial spatial = Spatial::None;
  std::vector<std::size_t> integer_inputs = {};  // indices of INT64 inputs
  bool passes_type = false;
  std::optional<MovedToInputs> moved = std::nullopt;
  Vjp vjp = nullptr;
};

using OpTable = std::map<std::string, OpEntry>;

// The entry of default-domain op `op`; null for an op the runner does not compute. (The
// callers check the domain.)
const OpEntry* find_op(const std::string& op);

// The families' parts of the table (ops_FAMILY.cpp).
OpTable conv_ops();
OpTable batchnorm_ops();
OpTable elementwise_ops();
OpTable pool_ops();
OpTable shape_ops();

}  // namespace foldcheck::ops
