#pragma once
// The arithmetic a conv's products and sums are computed in, as engines and accelerators do:
// float32 as given, TF32 tensor cores, bf16 or fp16 operands with float32 accumulation, fp16
// operands with fp16 accumulation, bf16x3 split-float emulation of float32.
//
// Contract: each is described by what happens to its operands and its sums:
//   operands  every input value x and weight w is converted to a narrower operand format
//             (p significand bits, an exponent range) before it is multiplied: tf32 p = 11
//             (10 stored bits, float32's exponents), bf16 p = 8 (float32's exponents), fp16
//             p = 11 (exponents -14..15, subnormals, overflow). The conversion is one of
//             nearest-even (IEEE's, cvt.rn), nearest-away (NVIDIA's cvt.rna.tf32.f32) or
//             truncation (a tensor core fed float32 bits drops the low ones); hardware
//             differs, so a check tries each (convert() below is exact: a value of the
//             format, held in a double).
//   split     bf16x3 writes each operand as hi + lo (hi = RN_bf16(x), lo = RN_bf16(x - hi))
//             and sums the three products hi*hi' + hi*lo' + lo*hi' (XLA's BF16_BF16_F32_X3,
//             oneDNN's and cuBLAS's split-float modes): the lo*lo' product and each operand's
//             remainder |x - hi - lo| <= 2^-16 |x| are dropped.
//   products  a product of two operands is exact in float32 (11 + 11 and 8 + 8 bits fit in 24)
//             and in the accumulator.
//   sums      accumulated in float32 (u = 2^-24) or, for fp16-accumulate, in fp16 (u = 2^-11),
//             in any order and in chunks (an MMA of depth k accumulates k products, then adds
//             the chunk to the running sum): Higham's order-independent bound
//             |fl(sum p_j) - sum p_j| <= gamma_n(u) sum |p_j| over the n = k (+1 for a bias)
//             terms holds for every order and every chunking, so it holds here unchanged.
// The exact result of the converted operands (the certified reference on them) therefore
// leaves only the sums to bound: gamma_n(u_acc) sum |x^ w^|. That is what makes a small change
// visible under TF32, whose per-operand error (2^-11 relative) is itself larger than most
// bugs. An operand converted some other way (keeping more bits than p) is within the general
// bound
//   |x^ w^ - x w| <= (2 e + e^2) |x w|,  e = 2^(1-p) (any conversion keeping p bits, nearest
//   or truncated, moves a value by less than one unit in its p-th bit: < 2^(1-p) relative)
//   |y^ - y| <= (2 e + e^2) sum|x w| + gamma_n(u_acc) (1 + e)^2 sum|x w|
// which general_bound_factor() states per unit sum|x w|; it is reported beside the replays.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace foldcheck {

enum class OperandConversion { NearestEven, NearestAway, Truncate };
const char* name(OperandConversion c);  // "nearest-even", "nearest-away", "truncate"

// A binary operand format: p significand bits, normal exponents emin..emax, subnormals below.
struct OperandFormat {
  int precision = 24;
  int emin = -126, emax = 127;
  double u() const;    // unit roundoff 2^-p of a nearest conversion
  double eta() const;  // absolute error bound below the normal range, 2^(emin - p)
};

// Whether every finite value of v is a value of f (an output stored in that format).
bool all_values_of(const std::vector<double>& v, const OperandFormat& f);

enum class ConvArithmeticKind { Float32, TF32, BF16, FP16, FP16Accumulate, BF16x3 };

struct ConvArithmetic {
  ConvArithmeticKind kind = ConvArithmeticKind::Float32;
  const char* name() const;  // "float32", "tf32", "bf16", "fp16", "fp16-accumulate", "bf16x3"
  // Operands converted before they are multiplied (none: float32's own values).
  std::optional<OperandFormat> operands() const;
  // The 16-bit format its outputs may be stored in (torch.autocast's, TensorRT's fp16 mode):
  // bf16's, fp16's and fp16-accumulate's operand format; none for float32, tf32 (a tensor
  // core's result is float32) and bf16x3 (an emulation of float32).
  std::optional<OperandFormat> storage_format() const;
  // The conversions a replay tries, most common first (empty for float32).
  std::vector<OperandConversion> conversions() const;
  // bf16x3's split into hi + lo (three products per multiply-add).
  bool split() const { return kind == ConvArithmeticKind::BF16x3; }
  // The accumulator's unit roundoff: 2^-24 (float32), 2^-11 (fp16-accumulate).
  double accumulate_u() const;
  // A narrower accumulator than float32 (fp16-accumulate): its format, whose eta and largest
  // finite value a partial sum may meet; none for float32 sums.
  std::optional<OperandFormat> narrow_accumulator() const;
  // Per unit sum|x w|: the conversions' part (2 e + e^2) of the general bound above (0 for
  // float32); the caller adds gamma_n(u_acc) (1 + e)^2.
  double general_operand_factor() const;
  // What a user reads: "TF32 tensor cores (operands rounded to 10 bits, float32 accumulation)".
  std::string description() const;
  bool operator==(const ConvArithmetic&) const = default;
};

// Whether outputs v computed in a were stored in its 16-bit format: a has one and every finite
// value of v is one of its values. The one test diagnose's replays, accuracy-diff and engines
// (layers and final outputs) apply before they add the storage's rounding to a bound.
bool stored_in_16_bits(const ConvArithmetic& a, const std::vector<double>& v);

// The general bound of arithmetic a on a conv whose outputs each sum k products (the
// conversions' part and the accumulation's, conv_arithmetic's header), per output:
//   |y^ - sum x w| <= factor sum|x w| + underflow(sum_ch |w|, max |x|)
// factor = (2 e + e^2) + gamma (1 + e)^2, gamma = gamma_k'(u_acc) (k' = 3 k for bf16x3's three
// products: their magnitudes sum to <= (1 + 4a + 7a^2)|x w| (a = 2^-8), covered by (1 + e)^2 with
// e = a because its operand factor charges 4a^2 where 3.05a^2 is needed). Below the operand
// format's normal range a conversion errs absolutely by at most a subnormal step s = 2 eta
// (truncation's; nearest's is half), so |x' w' - x w| <= |dx||w| + |x||dw| + |dx||dw| adds
// a = s (1 + e)(sum_ch |w| + k max|x|) + k s^2 per output (sum_ch |w|: the output channel's
// weights, a bound on its window's; bf16x3's hi and lo are bf16 values, so the same with
// bf16's s); the sums then see magnitudes up to that much larger: underflow = a (1 + gamma).
// A narrower accumulator than float32 (fp16-accumulate) errs absolutely too, by its eta per
// addition: k' eta_acc (accumulator_eta, for a caller that does not model the accumulator
// otherwise). One statement of it, for diagnose's general bound, the engines' layers and the
// evaluator (Arithmetic::conv_operands). None for float32 (no conversion) or where gamma is
// undefined (k' u_acc >= 1/2: fp16 accumulation of 1,024 products or more).
struct GeneralConvBound {
  double factor = 0;          // per unit sum|x w|
  double operand_factor = 0;  // its conversions' part, 2 e + e^2
  double e = 0, s = 0, k = 0, gamma = 0;
  double accumulator_eta = 0;  // k' eta_acc: a narrower accumulator's absolute error (0 for float32 sums)
  // The relative factor with the sums' own gamma_k in place of gamma (the evaluator's path
  // arithmetic): operand_factor + gk (1 + e)^2.
  double relative(double gk) const;
  double underflow(double channel_abs_w, double max_abs_x) const;  // the conversions' absolute part
  // underflow() of every output channel: weights w (O x per, per = the window's terms), input x.
  std::vector<double> underflow_per_channel(const std::vector<double>& w, std::size_t per,
                                            const std::vector<double>& x) const;
};
std::optional<GeneralConvBound> general_conv_bound(const ConvArithmetic& a, double k);

// Every arithmetic, float32 first (the default).
const std::vector<ConvArithmetic>& all_conv_arithmetics();
// Throws InputError naming the valid ones.
ConvArithmetic conv_arithmetic_from_name(std::string_view name);
std::string conv_arithmetic_names();  // "float32|tf32|bf16|fp16|fp16-accumulate|bf16x3"

// The algorithm a conv's sums are formed by (combinable with an arithmetic):
//   direct       the window's products summed (any order, any chunking): gamma_k
//   winograd2/4/6  Winograd's F(m x m, 3 x 3), m = 2, 4, 6: the transforms' own roundings
//                (layer/winograd_bound.hpp: gamma_N |A^T| [sum (|G||g||G^T|) (.) (|B^T||d||B|)] |A|),
//                with the interpolation points 0, +-1, +-2, +-1/2 (NNPACK's, cuDNN's, Lavin's)
//   winograd4-onednn  oneDNN's F(4 x 4, 3 x 3) (its x64 wino_4x3 kernels): points 0, +-5/8, +-3/2,
//                whose transforms' magnitudes differ (up to 3.7x on W): its own matrices
//   fft          transformed by 2-D FFTs, multiplied pointwise, transformed back: a normwise
//                bound per output plane (layer/fft_bound.hpp), float32 arithmetic only
//   split-k:S    S partial sums of about k/S products each, added at the end: covered by the
//                order-independent gamma_k unchanged (S >= 1).
enum class ConvAlgorithmKind { Direct, Winograd2, Winograd4, Winograd6, FFT, SplitK, Winograd4OneDnn };
struct ConvAlgorithm {
  ConvAlgorithmKind kind = ConvAlgorithmKind::Direct;
  int splits = 1;             // split-k's S
  std::string name() const;   // "direct", "winograd4", "split-k:8"
  int winograd_tile() const;  // m, or 0 when not Winograd
  bool onednn_points() const { return kind == ConvAlgorithmKind::Winograd4OneDnn; }  // oneDNN's F(4x4) transform
  bool operator==(const ConvAlgorithm&) const = default;
};
// "direct", "winograd2", "winograd4", "winograd4-onednn", "winograd6", "fft", "split-k:S" (S a
// positive integer); throws InputError naming them.
ConvAlgorithm conv_algorithm_from_name(std::string_view name);
inline constexpr const char* kConvAlgorithmNames =
    "direct|winograd2|winograd4|winograd4-onednn|winograd6|fft|split-k:S";

// Whether only the general bound applies to a conv computed in `alg` under arithmetic `a`: an
// operand arithmetic on Winograd's transforms (the transformed values are converted, not
// replayed). It is too wide to see a wrong channel: an output within it passes nothing
// (MISTRUSTED, diagnose and engines alike); beyond it is evidence.
inline bool only_general_bound(const ConvArithmetic& a, const ConvAlgorithm& alg) {
  return a.kind != ConvArithmeticKind::Float32 && alg.winograd_tile() > 0;
}

// x (a finite value of float32 or wider) converted to the operand format: its value, exact in
// a double. Nearest-even and nearest-away round to nearest (ties as named) and overflow to an
// infinity past the format's range (the last finite value's half-ulp), truncation rounds
// toward zero and saturates at the largest finite value, as dropping bits does.
double convert(double x, const OperandFormat& f, OperandConversion c);

// bf16x3's split: hi = RN_bf16(x), lo = RN_bf16(x - hi) (x - hi is exact in a double).
struct SplitOperand {
  double hi = 0, lo = 0;
};
SplitOperand split_bf16(double x);

}  // namespace foldcheck
