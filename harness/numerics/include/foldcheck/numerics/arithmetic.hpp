#pragma once
// Arithmetic variants engines use, and the stages of a conv+BN computation.
//
// Contract: an Arithmetic describes *how* the float operations of a path are performed,
// independently of the recipe (which operations) and the accumulation order:
//   fma            multiply-adds contract into one rounding (bias folds, BatchNorm's
//                  x*a + shift, the conv's accumulation)
//   newton_steps   < 0: 1/sqrt is a correctly rounded sqrt and a division;
//                  0, 1, 2: a 12-bit reciprocal-square-root estimate (hardware style, as
//                  x86 rsqrtps; modelled as 1/sqrt(a) rounded to 12 significant bits, and
//                  bounded by Intel's documented |rel err| <= 1.5*2^-12) refined by that many
//                  Newton steps y <- y*(1.5 - (y*(0.5*a))*y); a division by sqrt(a)
//                  becomes a multiplication by the estimate, as fast-math compilers do.
//   rsqrt_multiply a division by sqrt(a) becomes a multiplication by 1/sqrt(a) computed as
//                  a correctly rounded sqrt and reciprocal (one more rounding; what algebraic
//                  simplifiers do, e.g. TVM SimplifyExpr); implied by the fast rsqrt.
//   weight_dtype   folded weights stored in this type (bf16/fp16 weights of a float32
//                  model); unset: the model's dtype.
//   fold_dtype     the fold's operations (the recipe's chain and w * scale) each rounded
//                  to this type: float16/bfloat16 as PyTorch's fusers compute on a .half()
//                  or .bfloat16() module (narrow.hpp); unset: the model's arithmetic type
//                  (float32 for 16-bit models, as engines that fold in float). Read by
//                  fold_parameters only (explain and fold checks of observed folds).
//   rsqrt_rounds_twice  with a 16-bit fold_dtype: torch.rsqrt as PyTorch's scalar loop
//                  computes it (sqrt and the division each rounded to the type) instead of
//                  its vector kernel (1/sqrt in float32, rounded once). Which elements of a
//                  tensor take the scalar loop depends on its length and alignment (measured,
//                  torch 2.14: the last ones of some lengths, all of a length below 32), so
//                  a replay of a PyTorch fold tries both per channel (explain.cpp).
//   conv_operands  the conv's products take operands converted to a narrower format first
//                  (TF32, bf16, fp16 operands: conv_arithmetic.hpp), each input value and
//                  weight by `conversion`, as tensor cores and bf16 dot-product units do; the
//                  sums stay in the path's own arithmetic (the conv bias is added unconverted).
//                  Float32: none. evaluate() converts, error_bounds() adds the conversions'
//                  part of the general bound (general_conv_bound).
// Stages name where each rounding happens, for attribution (attribution.hpp).
#include <cmath>
#include <optional>
#include <string>

#include "foldcheck/numerics/conv_arithmetic.hpp"
#include "foldcheck/numerics/dtype.hpp"

namespace foldcheck {

// The hardware-style 12-bit estimate of 1/sqrt(a): 1/sqrt(a) (computed in double,
// relative error <= 2^-52) rounded to 12 significant bits.
inline double rsqrt_estimate12(double a) {
  const double r = 1.0 / std::sqrt(a);
  int e = 0;
  const double m = std::frexp(r, &e);
  return std::ldexp(std::nearbyint(std::ldexp(m, 12)), e - 12);
}


struct Arithmetic {
  bool fma = false;
  int newton_steps = -1;
  bool rsqrt_multiply = false;
  std::optional<DType> weight_dtype;
  std::optional<DType> fold_dtype;
  bool rsqrt_rounds_twice = false;
  ConvArithmetic conv_operands;  // float32 (none), tf32, bf16 or fp16
  OperandConversion conversion = OperandConversion::NearestEven;

  bool fast_rsqrt() const { return newton_steps >= 0; }
  bool multiplies_by_rsqrt() const { return fast_rsqrt() || rsqrt_multiply; }
  std::string label() const;  // "default", "fma", "fast-rsqrt-1nr", "bfloat16-weights", "float16-fold",
                              // "tf32-nearest-away", joined by '+'
  bool operator==(const Arithmetic&) const = default;
};

// Parses a case file's variant object {"fma": bool, "rsqrt": "exact"|"fast",
// "newton_steps": 0..2, "weight_dtype": "bfloat16"|...}; throws InputError.
Arithmetic arithmetic_from_json_fields(bool fma, const std::string& rsqrt, int newton_steps,
                                       const std::string& weight_dtype);

// Sets a's conv operands to the arithmetic named (float32, tf32, bf16, fp16) converted by the
// conversion named ("" : the arithmetic's most common one, conv_arithmetic.hpp's first);
// throws InputError for another name, or for fp16-accumulate and bf16x3 (a narrower
// accumulator and split operands are not emulated by the evaluator: diagnose judges them).
void set_conv_operands(Arithmetic& a, const std::string& arithmetic, const std::string& conversion);

// Where a rounding happens. Fused path: var_eps (var + eps, with eps's conversion),
// rsqrt (sqrt and the reciprocal or division by it), scale (gamma times the reciprocal),
// weight (w * scale and storing the folded weight), bias (every operation of the bias
// fold and the TVM post-add's addend), accumulation (products, sums, conv bias add,
// Winograd transforms), output (every rounding of an activation to the storage dtype).
// Unfused path: the BatchNorm's x - mean and + beta are `bias`, its division by sqrt is
// `rsqrt`, its multiplications by gamma (or by the scale) are `scale`.
enum class Stage : unsigned { VarEps, Rsqrt, Scale, Weight, Bias, Accumulation, Output };
inline constexpr unsigned kNumStages = 7;
const char* name(Stage s);
inline constexpr unsigned bit(Stage s) { return 1u << static_cast<unsigned>(s); }

// Marks the operations in its lifetime as belonging to stage s. A no-op for the plain
// float types and Bounded; the attribution number type (xnum.hpp) specialises it.
template <class N>
struct StageScope {
  explicit StageScope(Stage) {}
};

}  // namespace foldcheck
