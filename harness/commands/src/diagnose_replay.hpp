#pragma once
// diagnose's replays of a conv computed in another arithmetic (numerics/conv_arithmetic.hpp:
// TF32, bf16 or fp16 operands, fp16 accumulation, bf16x3).
//
// Contract: the operand conversions are deterministic and diagnose holds the operands, so a
// replay converts them exactly as the hardware would (each conversion the arithmetic names is
// tried, as explain replays fold recipes) and takes the certified exact conv of the converted
// operands: only the sums' rounding, gamma_n(u_acc) sum|x^ w^|, is left to bound (diagnosis::
// score with the replay's Layer). Two paths:
//   unfused  the conv of the converted x and w; a BatchNorm after it runs in float32 (the
//            layer's affine model, bounded as for float32)
//   folded   (with a BatchNorm) the conv of the converted x and of the converted folded weights
//            w' = fl32(w fl32(a)), plus the exact folded bias b' = (b - mean) a + beta. An
//            engine's own fold w'_e lies within |w'_e - w a| <= delta |w a|, delta = 2^-18 (every
//            fold recipe of recipes.hpp with an exact or Newton-refined rsqrt is within 8
//            float32 roundings, 2^-21; 2^-18 leaves room for the others), and a conversion is
//            monotone: where conv(w a (1 - delta)) and conv(w a (1 + delta)) differ, the
//            engine's converted weight may differ from the replay's by up to d_j (the larger
//            distance), and the element's extra error is sum_j d_j |x^_j| over such weights
//            of its window, plus the folded bias's float32 error gamma_8(u)(|a|(|b| + |mean|) +
//            |beta|). Every other weight converts to the replay's value exactly.
// A replay whose converted operands overflow the operand format (fp16's 65504) is left out:
// its products are infinite, which no bound describes.
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "foldcheck/commands/diagnose.hpp"
#include "foldcheck/diagnosis/hypotheses.hpp"
#include "foldcheck/numerics/conv_arithmetic.hpp"
#include "foldcheck/reference/layer.hpp"

namespace foldcheck {

// The exact conv of x and w (and the bias), certified: c per output, and sum |x w|.
struct ExactConv {
  std::vector<diagnosis::ld> c;
  std::vector<double> A;
};
ExactConv exact_conv(const ref::ConvGeometry& g, const std::vector<double>& x, const std::vector<double>& w,
                     const std::vector<double>* bias, const ref::Options& opts, DType dtype, ExactConvCache* cache);

struct Replay {
  std::string name;  // "tf32 nearest-away", "tf32 nearest-away, folded", "float32 operands"
  ConvArithmetic arithmetic;
  std::optional<OperandConversion> conversion;
  bool folded = false;
  diagnosis::Layer L;
  diagnosis::AffineModel model;  // the layer as given on this replay (identity when folded)
};

// The replays of arithmetic a (none for float32): per conversion the unfused one and, with a
// BatchNorm, the folded one. base: the layer with float32 operands (its dtype, shapes, bias).
std::vector<Replay> replays(const DiagnoseInput& in, const ref::ConvGeometry& g, const diagnosis::Layer& base,
                            const diagnosis::AffineModel& given, const ConvArithmetic& a);

// The accumulator of arithmetic a on L: its unit roundoff, and for a narrower one than float32
// its eta and largest finite value (diagnosis::Layer's u_acc, eta_acc, acc_max).
void set_accumulator(diagnosis::Layer& L, const ConvArithmetic& a);

// The layer as given with the general bound of a's operand conversion (any conversion that
// keeps the operand format's bits: numerics' general_conv_bound, the one statement of it) on
// top of the float32 one; none for float32, or where the accumulation's gamma_k is undefined
// (k u_acc >= 1/2). Its absolute part below the format's normal range goes into the conv's
// error (Layer::conv_err), with sum_ch |w| of each output channel and the input's max |x|.
std::optional<diagnosis::Layer> general_bound_layer(const DiagnoseInput& in, const diagnosis::Layer& base,
                                                    const ConvArithmetic& a);

}  // namespace foldcheck
