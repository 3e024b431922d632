// The conv arithmetics and operand conversions (foldcheck/numerics/conv_arithmetic.hpp).
#include "foldcheck/numerics/conv_arithmetic.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "foldcheck/base/errors.hpp"
#include "foldcheck/numerics/bounded.hpp"

namespace foldcheck {

const char* name(OperandConversion c) {
  switch (c) {
    case OperandConversion::NearestEven: return "nearest-even";
    case OperandConversion::NearestAway: return "nearest-away";
    case OperandConversion::Truncate: return "truncate";
  }
  return "?";
}

const char* ConvArithmetic::name() const {
  switch (kind) {
    case ConvArithmeticKind::Float32: return "float32";
    case ConvArithmeticKind::TF32: return "tf32";
    case ConvArithmeticKind::BF16: return "bf16";
    case ConvArithmeticKind::FP16: return "fp16";
    case ConvArithmeticKind::FP16Accumulate: return "fp16-accumulate";
    case ConvArithmeticKind::BF16x3: return "bf16x3";
  }
  return "?";
}

std::optional<OperandFormat> ConvArithmetic::operands() const {
  switch (kind) {
    case ConvArithmeticKind::Float32: return std::nullopt;
    case ConvArithmeticKind::TF32: return OperandFormat{11, -126, 127};
    case ConvArithmeticKind::BF16:
    case ConvArithmeticKind::BF16x3: return OperandFormat{8, -126, 127};
    case ConvArithmeticKind::FP16:
    case ConvArithmeticKind::FP16Accumulate: return OperandFormat{11, -14, 15};
  }
  return std::nullopt;
}

// TF32 occurs with all three (cuDNN/cuBLAS round to nearest-away; tensor cores fed float32
// bits truncate; emulations round to nearest-even); bf16 and fp16 conversions are
// nearest-even in every engine measured (vcvtneps2bf16, PyTorch, oneDNN), truncation in some
// older bf16 code; bf16x3's split is nearest-even by definition.
std::vector<OperandConversion> ConvArithmetic::conversions() const {
  using C = OperandConversion;
  switch (kind) {
    case ConvArithmeticKind::Float32: return {};
    case ConvArithmeticKind::TF32: return {C::NearestAway, C::NearestEven, C::Truncate};
    case ConvArithmeticKind::BF16: return {C::NearestEven, C::Truncate, C::NearestAway};
    case ConvArithmeticKind::FP16:
    case ConvArithmeticKind::FP16Accumulate:
    case ConvArithmeticKind::BF16x3: return {C::NearestEven};
  }
  return {};
}

double OperandFormat::u() const { return std::ldexp(1.0, -precision); }
double OperandFormat::eta() const { return std::ldexp(1.0, emin - precision); }

bool all_values_of(const std::vector<double>& v, const OperandFormat& f) {
  return std::all_of(v.begin(), v.end(),
                     [&](double x) { return !std::isfinite(x) || convert(x, f, OperandConversion::NearestEven) == x; });
}

std::optional<OperandFormat> ConvArithmetic::storage_format() const {
  if (kind == ConvArithmeticKind::BF16 || kind == ConvArithmeticKind::FP16 ||
      kind == ConvArithmeticKind::FP16Accumulate)
    return operands();
  return std::nullopt;
}

bool stored_in_16_bits(const ConvArithmetic& a, const std::vector<double>& v) {
  const std::optional<OperandFormat> f = a.storage_format();
  return f && all_values_of(v, *f);
}

std::optional<OperandFormat> ConvArithmetic::narrow_accumulator() const {
  if (kind == ConvArithmeticKind::FP16Accumulate) return operands();
  return std::nullopt;
}

double ConvArithmetic::accumulate_u() const { return kind == ConvArithmeticKind::FP16Accumulate ? 0x1p-11 : 0x1p-24; }

// e = 2^(1-p) per operand (any conversion keeping p bits). bf16x3: each operand keeps
// x = hi + lo + r, |r| <= u_b^2 |x|, |lo| <= u_b (1 + u_b) |x| (u_b = 2^-8), and the dropped
// lo*lo' with the remainders give |x w - (hi hi' + hi lo' + lo hi')| <= (u_b^2 (1+u_b)^2 +
// 2 u_b^2 (1 + u_b + u_b^2) + u_b^4) |x w| <= 3.05 u_b^2 |x w|; 4 u_b^2 is stated.
double ConvArithmetic::general_operand_factor() const {
  if (split()) return 4 * 0x1p-16;
  const auto f = operands();
  if (!f) return 0;
  const double e = std::ldexp(1.0, 1 - f->precision);
  return 2 * e + e * e;
}

std::optional<GeneralConvBound> general_conv_bound(const ConvArithmetic& a, double k) {
  const auto f = a.operands();
  const double kk = k * (a.split() ? 3 : 1);
  if (!f || kk * a.accumulate_u() >= 0.5) return std::nullopt;
  GeneralConvBound b;
  b.e = std::ldexp(1.0, 1 - f->precision);
  b.k = kk;
  b.gamma = gamma_k(kk, a.accumulate_u());
  b.operand_factor = a.general_operand_factor();
  b.factor = round_up(b.relative(b.gamma));
  b.s = 2 * f->eta();
  if (const auto acc = a.narrow_accumulator()) b.accumulator_eta = kk * acc->eta();
  return b;
}

double GeneralConvBound::relative(double gk) const { return round_up(operand_factor + gk * (1 + e) * (1 + e)); }

double GeneralConvBound::underflow(double channel_abs_w, double max_abs_x) const {
  return round_up((s * (1 + e) * (channel_abs_w * (1 + 0x1p-40) + k * max_abs_x) + k * s * s) * (1 + gamma));
}

std::vector<double> GeneralConvBound::underflow_per_channel(const std::vector<double>& w, std::size_t per,
                                                            const std::vector<double>& x) const {
  double x_max = 0;
  for (const double v : x) x_max = std::max(x_max, std::fabs(v));
  std::vector<double> w1(per ? w.size() / per : 0, 0.0);
  for (std::size_t j = 0; j < w1.size() * per; ++j) w1[j / per] += std::fabs(w[j]);
  for (double& v : w1) v = underflow(v, x_max);
  return w1;
}

std::string ConvArithmetic::description() const {
  switch (kind) {
    case ConvArithmeticKind::Float32: return "float32 operands and accumulation";
    case ConvArithmeticKind::TF32: return "TF32 tensor cores (operands rounded to 10 bits, float32 accumulation)";
    case ConvArithmeticKind::BF16: return "bf16 operands with float32 accumulation";
    case ConvArithmeticKind::FP16: return "fp16 operands with float32 accumulation";
    case ConvArithmeticKind::FP16Accumulate: return "fp16 operands with fp16 accumulation";
    case ConvArithmeticKind::BF16x3: return "bf16x3 split-float emulation of float32 (three bf16 products)";
  }
  return "?";
}

const std::vector<ConvArithmetic>& all_conv_arithmetics() {
  using K = ConvArithmeticKind;
  static const std::vector<ConvArithmetic> all{{K::Float32}, {K::TF32},           {K::BF16},
                                               {K::FP16},    {K::FP16Accumulate}, {K::BF16x3}};
  return all;
}

std::string conv_arithmetic_names() {
  std::string s;
  for (const ConvArithmetic& a : all_conv_arithmetics()) {
    if (!s.empty()) s += '|';
    s += a.name();
  }
  return s;
}

ConvArithmetic conv_arithmetic_from_name(std::string_view n) {
  for (const ConvArithmetic& a : all_conv_arithmetics())
    if (n == a.name()) return a;
  throw InputError("unknown arithmetic '" + std::string(n) + "' (expected " + conv_arithmetic_names() + ")");
}

// With q the exponent of the format's spacing at x (its p-th bit, floored at the subnormal
// spacing), x 2^-q is exact in a double (|x| < 2^53 2^q) and an integer at the format's
// values; rounding it to an integer by the conversion's rule and scaling back is exact.
double convert(double x, const OperandFormat& f, OperandConversion c) {
  if (x == 0 || !std::isfinite(x)) return x;
  const int e = std::ilogb(x);
  const int q = std::max(e, f.emin) - f.precision + 1;
  const double m = std::ldexp(x, -q);
  double r = 0;
  switch (c) {
    case OperandConversion::NearestEven: r = std::nearbyint(m); break;
    case OperandConversion::NearestAway: r = std::round(m); break;
    case OperandConversion::Truncate: r = std::trunc(m); break;
  }
  const double v = std::ldexp(r, q);
  const double max_finite = std::ldexp(2.0 - std::ldexp(1.0, 1 - f.precision), f.emax);
  if (std::fabs(v) > max_finite)
    return c == OperandConversion::Truncate ? std::copysign(max_finite, x)
                                            : std::copysign(std::numeric_limits<double>::infinity(), x);
  return v;
}

std::string ConvAlgorithm::name() const {
  switch (kind) {
    case ConvAlgorithmKind::Direct: return "direct";
    case ConvAlgorithmKind::Winograd2: return "winograd2";
    case ConvAlgorithmKind::Winograd4: return "winograd4";
    case ConvAlgorithmKind::Winograd4OneDnn: return "winograd4-onednn";
    case ConvAlgorithmKind::Winograd6: return "winograd6";
    case ConvAlgorithmKind::FFT: return "fft";
    case ConvAlgorithmKind::SplitK: return "split-k:" + std::to_string(splits);
  }
  return "?";
}

int ConvAlgorithm::winograd_tile() const {
  switch (kind) {
    case ConvAlgorithmKind::Winograd2: return 2;
    case ConvAlgorithmKind::Winograd4:
    case ConvAlgorithmKind::Winograd4OneDnn: return 4;
    case ConvAlgorithmKind::Winograd6: return 6;
    default: return 0;
  }
}

ConvAlgorithm conv_algorithm_from_name(std::string_view n) {
  using K = ConvAlgorithmKind;
  for (const K k : {K::Direct, K::Winograd2, K::Winograd4, K::Winograd4OneDnn, K::Winograd6, K::FFT})
    if (ConvAlgorithm a{k}; n == a.name()) return a;
  if (n.substr(0, 8) == "split-k:" && n.size() > 8 && n.size() <= 14 &&
      n.substr(8).find_first_not_of("0123456789") == std::string_view::npos) {
    const int s = std::stoi(std::string(n.substr(8)));
    if (s >= 1) return ConvAlgorithm{K::SplitK, s};
  }
  throw InputError("unknown algorithm '" + std::string(n) + "' (expected " + kConvAlgorithmNames + ")");
}

SplitOperand split_bf16(double x) {
  const OperandFormat bf16{8, -126, 127};
  SplitOperand s;
  s.hi = convert(x, bf16, OperandConversion::NearestEven);
  s.lo = convert(x - s.hi, bf16, OperandConversion::NearestEven);
  return s;
}

}  // namespace foldcheck
