// BatchNorm parameter validation (bn_check.hpp).
#include "foldcheck/layer/bn_check.hpp"

#include <cmath>

#include <fmt/format.h>

#include "foldcheck/base/errors.hpp"

namespace foldcheck {

std::string first_nonfinite(const std::vector<double>& v) {
  for (std::size_t i = 0; i < v.size(); ++i)
    if (!std::isfinite(v[i])) return fmt::format("{} at index {}", std::isnan(v[i]) ? "NaN" : v[i] > 0 ? "+Inf" : "-Inf", i);
  return "";
}

void check_bn_params(const ref::BnParams& bn, std::size_t channels, const std::string& what) {
  if (channels == 0) throw InputError(what + ": empty BatchNorm (no channels)");
  const std::pair<const char*, const std::vector<double>*> vs[] = {
      {"gamma", &bn.gamma}, {"beta", &bn.beta}, {"mean", &bn.mean}, {"var", &bn.var}};
  for (const auto& [name, v] : vs) {
    if (v->size() != channels)
      throw InputError(fmt::format("{}: {} has {} values for {} channels", what, name, v->size(), channels));
    if (const std::string bad = first_nonfinite(*v); !bad.empty())
      throw InputError(fmt::format("{}: {} has {}", what, name, bad));
  }
  for (std::size_t c = 0; c < channels; ++c)
    if (bn.var[c] < 0)
      throw InputError(fmt::format("{}: var: negative variance {:g} at channel {}", what, bn.var[c], c));
  if (!std::isfinite(bn.eps)) throw InputError(fmt::format("{}: eps is {}", what, bn.eps));
  if (!(bn.eps > 0))
    throw InputError(fmt::format("{}: eps must be > 0 (got {:g}; every framework's BatchNorm adds a positive epsilon)",
                                 what, bn.eps));
}

std::string past_range(double x, DType t, const std::string& at) {
  if (!std::isfinite(x) || std::isfinite(round_to(t, x))) return "";
  return fmt::format("{:g}{} is past {}'s range (largest finite {:g})", x, at, name(t), info(t).max_finite);
}

std::string first_overflow(const std::vector<double>& v, DType t) {
  for (std::size_t i = 0; i < v.size(); ++i)
    if (std::isfinite(v[i]) && !std::isfinite(round_to(t, v[i]))) return past_range(v[i], t, fmt::format(" at index {}", i));
  return "";
}

void check_bn_params_in(const ref::BnParams& bn, std::size_t channels, DType t, const std::string& what) {
  check_bn_params(bn, channels, what);
  // eps as each recipe converts it: to the arithmetic type, and to float32 whatever the
  // dtype (TVM, ONNX Runtime and onnxoptimizer keep it as a float32 attribute).
  const DType a = info(t).arithmetic;
  for (const DType e : {a, DType::Float32}) {
    const double eps = round_to(e, bn.eps);
    for (std::size_t c = 0; c < channels; ++c) {
      const double sum = round_to(a, round_to(t, bn.var[c]) + eps);
      if (!(sum > 0))
        throw InputError(fmt::format("{}: var + eps is 0 in {} at channel {} (var {:g}, eps {:g} is {:g} in {}): "
                                     "1/sqrt(var + eps) would be infinite",
                                     what, name(a), c, bn.var[c], bn.eps, eps, name(e)));
      // Past the range, every recipe's scale is 1/sqrt(inf) = 0 while the exact scale is
      // not: the fold's error is then not rounding, and no bound holds for it.
      if (!std::isfinite(sum))
        throw InputError(fmt::format("{}: var + eps overflows {} at channel {} (var {:g}, eps {:g}): "
                                     "1/sqrt(var + eps) would be 0",
                                     what, name(a), c, bn.var[c], bn.eps));
    }
  }
}

}  // namespace foldcheck
