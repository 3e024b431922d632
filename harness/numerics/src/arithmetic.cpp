#include "foldcheck/numerics/arithmetic.hpp"

#include <vector>

#include "foldcheck/base/errors.hpp"

namespace foldcheck {

std::string Arithmetic::label() const {
  std::string s;
  auto add = [&](const std::string& p) { s += (s.empty() ? "" : "+") + p; };
  if (fma) add("fma");
  if (fast_rsqrt()) add("fast-rsqrt-" + std::to_string(newton_steps) + "nr");
  if (rsqrt_multiply && !fast_rsqrt()) add("rsqrt-multiply");
  if (weight_dtype) add(std::string(name(*weight_dtype)) + "-weights");
  if (fold_dtype) add(std::string(name(*fold_dtype)) + "-fold");
  if (rsqrt_rounds_twice) add("rsqrt-rounds-twice");
  if (conv_operands.operands()) add(std::string(conv_operands.name()) + "-" + name(conversion));
  return s.empty() ? "default" : s;
}

Arithmetic arithmetic_from_json_fields(bool fma, const std::string& rsqrt, int newton_steps,
                                       const std::string& weight_dtype) {
  Arithmetic a;
  a.fma = fma;
  if (rsqrt == "fast") {
    if (newton_steps < 0 || newton_steps > 2) throw InputError("newton_steps must be 0, 1 or 2 with rsqrt \"fast\"");
    a.newton_steps = newton_steps;
  } else if (rsqrt != "exact") {
    throw InputError("unknown rsqrt '" + rsqrt + "' (expected exact or fast)");
  }
  if (!weight_dtype.empty()) a.weight_dtype = dtype_from_name(weight_dtype);
  return a;
}

void set_conv_operands(Arithmetic& a, const std::string& arithmetic, const std::string& conversion) {
  const ConvArithmetic c = conv_arithmetic_from_name(arithmetic);
  if (c.split() || c.narrow_accumulator())
    throw InputError("arithmetic " + arithmetic +
                     " is not evaluated here (its split operands or fp16 sums are not emulated): diagnose judges an "
                     "output computed in it");
  if (!c.operands() && !conversion.empty())
    throw InputError("conversion '" + conversion + "' needs an operand arithmetic (tf32, bf16 or fp16)");
  a.conv_operands = c;
  if (!c.operands()) return;
  const std::vector<OperandConversion> cs = c.conversions();
  a.conversion = cs.front();
  if (conversion.empty()) return;
  std::string names;
  for (const OperandConversion k : cs) {
    if (conversion == name(k)) {
      a.conversion = k;
      return;
    }
    names += (names.empty() ? "" : ", ") + std::string(name(k));
  }
  for (const OperandConversion k :
       {OperandConversion::NearestEven, OperandConversion::NearestAway, OperandConversion::Truncate})
    if (conversion == name(k))
      throw InputError(arithmetic + " operands are converted " + names + " only, not " + conversion);
  throw InputError("unknown conversion '" + conversion + "' (expected nearest-even, nearest-away or truncate)");
}

const char* name(Stage s) {
  switch (s) {
    case Stage::VarEps: return "var_eps";
    case Stage::Rsqrt: return "rsqrt";
    case Stage::Scale: return "scale";
    case Stage::Weight: return "weight";
    case Stage::Bias: return "bias";
    case Stage::Accumulation: return "accumulation";
    case Stage::Output: return "output";
  }
  return "?";
}

}  // namespace foldcheck
