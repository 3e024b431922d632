// explain, diagnose and quant_check on arrays (bind.hpp); the BatchNorm arguments (bn_args.hpp).
#include <optional>

#include <pybind11/stl.h>

#include "arrays.hpp"
#include "bind.hpp"
#include "bn_args.hpp"
#include "call.hpp"
#include "foldcheck/base/errors.hpp"
#include "foldcheck/commands/diagnose.hpp"
#include "foldcheck/commands/explain.hpp"
#include "foldcheck/io/bn_params.hpp"
#include "foldcheck/layer/bn_check.hpp"
#include "foldcheck/quant/quant_check.hpp"
#include "foldcheck/reports/text.hpp"
#include "result.hpp"

namespace foldcheck::py {

BnSources bn_sources(const OptArray& gamma, const OptArray& beta, const OptArray& mean, const OptArray& var,
                     const pyb::handle& eps) {
  BnSources s;
  s.given_as = "arguments";
  auto take = [](ValueSource& v, const OptArray& a, const char* label) {
    v.label = label;
    if (a) v.values = tensor_arg(*a, label).data;
  };
  take(s.gamma, gamma, "gamma");
  take(s.beta, beta, "beta");
  take(s.mean, mean, "mean");
  take(s.var, var, "var");
  s.eps = optional_number(eps, "eps", options::kAnyFinite);  // eps <= 0: the BatchNorm rule's refusal
  return s;
}

namespace {

Result py_explain(const pyb::array& original, const pyb::array& observed, const pyb::object& dtype_arg,
                  const OptArray& gamma, const OptArray& beta, const OptArray& mean, const OptArray& var,
                  const pyb::object& eps, const pyb::object& precision, const pyb::object& threads) {
  const Tensor o = tensor_arg(original, "original"), w = tensor_arg(observed, "observed");
  ExplainInput in;
  const std::optional<std::string> dtype = optional_text(dtype_arg, "dtype");
  in.dtype = dtype ? dtype_from_name(*dtype) : o.dtype;
  require_finite(o, "original");
  require_values_of(o, in.dtype, "original");
  require_values_of(w, in.dtype, "observed");
  if (o.shape != w.shape)
    throw InputError("observed: shape " + shape_string(w.shape) + ", original's is " + shape_string(o.shape));
  in.original = o.data;
  in.observed = w.data;
  BnRule rule;
  rule.max_values = static_cast<std::int64_t>(in.original.size());
  rule.dtype = in.dtype;
  rule.values = BnValues::Round;
  const LoadedBn bn = load_bn_params(bn_sources(gamma, beta, mean, var, eps), rule);
  // As the command: channels are the BatchNorm's (one when none is given); an array's axis 0
  // must then match them.
  if (o.shape.size() > 1 && bn.bn.gamma.size() > 1 && o.shape[0] != static_cast<std::int64_t>(bn.bn.gamma.size()))
    throw InputError("original: shape " + shape_string(o.shape) + " has " + std::to_string(o.shape[0]) +
                     " output channels but the BatchNorm has " + std::to_string(bn.bn.gamma.size()));
  in.bn = bn.bn;
  in.bn_given = bn.given;
  in.bn_source = bn.source;
  in.ref_options = reference_options(precision, threads);
  ExplainResult r = released([&] { return explain(in); });
  Result out = make_result("explain", r.to_json(), r.verdict(), reports::explain_text);
  out.add("residual_ulp", std::move(r.residual_ulp), o.shape);
  out.add("bound_ulp", std::move(r.bound_ulp), o.shape);
  out.add("exact", std::move(r.exact_fold), o.shape);
  return out;
}

Result py_diagnose(const pyb::array& x, const pyb::array& observed, const OptArray& weight, const OptArray& bias,
                   const OptArray& gamma, const OptArray& beta, const OptArray& mean, const OptArray& var,
                   const pyb::object& eps, const pyb::object& stride, const pyb::object& padding,
                   const pyb::object& dilation, const pyb::object& arithmetic, const pyb::object& algorithm,
                   const pyb::object& precision, const pyb::object& threads) {
  DiagnoseInput in;
  in.x = tensor_arg(x, "x");
  in.observed = tensor_arg(observed, "observed");
  require_finite(in.x, "x");
  if (weight) {
    in.weights = tensor_arg(*weight, "weight");
    if (in.weights->shape.empty() || in.weights->data.empty())
      throw InputError("weight: conv weights need an output-channel axis and at least one value (OIHW)");
    require_finite(*in.weights, "weight");
  }
  if (bias) {
    if (!weight) throw InputError("bias: a conv bias needs the conv's weight");
    const Tensor b = tensor_arg(*bias, "bias");
    require_finite(b, "bias");
    in.conv_bias = b.data;
  }
  // No BatchNorm argument means none (a plain conv), never a default BatchNorm.
  if (gamma || beta || mean || var || !eps.is_none()) {
    set_diagnose_bn(in, load_bn_params(bn_sources(gamma, beta, mean, var, eps), diagnose_bn_rule(in)));
    in.eps_given = !eps.is_none();
  } else if (!weight) {
    throw InputError("diagnose needs a conv (weight), a BatchNorm (gamma, beta, mean, var), or both");
  }
  in.arithmetic = conv_arithmetic_from_name(text(arithmetic, "arithmetic"));
  in.algorithm = conv_algorithm_from_name(text(algorithm, "algorithm"));
  in.stride = static_cast<std::int64_t>(integer(stride, "stride", options::kStride));
  in.dilation = static_cast<std::int64_t>(integer(dilation, "dilation", options::kDilation));
  if (const auto p = optional_integer(padding, "padding", options::kPadding))
    in.padding = static_cast<std::int64_t>(*p);
  in.ref = reference_options(precision, threads);
  const DiagnoseResult r = released([&] { return diagnose(in); });
  return make_result("diagnose", r.to_json(), r.verdict(), reports::diagnose_text);
}

QuantSpec quant_spec(const pyb::object& bits, const pyb::object& per_channel, const pyb::object& pow2,
                     const pyb::object& rounding) {
  QuantSpec q;
  q.bits = static_cast<int>(integer(bits, "bits", options::kQuantBits));
  q.per_channel = flag(per_channel, "per_channel");
  q.pow2 = flag(pow2, "pow2");
  q.rounding = quant_rounding_from_name(text(rounding, "rounding"));
  return q;
}

Result py_quant_check(const pyb::array& weight, const OptArray& found, const OptArray& scales, const OptArray& gamma,
                      const OptArray& beta, const OptArray& mean, const OptArray& var, const pyb::object& eps,
                      const pyb::object& bits, const pyb::object& per_channel, const pyb::object& pow2,
                      const pyb::object& rounding, const pyb::object& precision, const pyb::object& threads) {
  QuantCheckInput in;
  in.weights = tensor_arg(weight, "weight");
  require_finite(in.weights, "weight");
  if (in.weights.shape.size() < 2 || in.weights.data.empty())
    throw InputError("weight: weights need an output-channel axis and at least one value");
  BnSources s = bn_sources(gamma, beta, mean, var, eps);
  for (ValueSource* v : {&s.gamma, &s.beta, &s.mean, &s.var})
    if (!v->given()) throw InputError(v->label + ": quant_check needs the BatchNorm's four parameters");
  in.bn = load_bn_params(s, quant_bn_rule(in.weights)).bn;
  in.spec = quant_spec(bits, per_channel, pow2, rounding);
  in.ref = reference_options(precision, threads);
  if (scales) {
    in.scales = tensor_arg(*scales, "scales").data;
    for (const double v : *in.scales)
      if (!(v > 0) || !std::isfinite(v)) throw InputError("scales: every scale must be a finite positive number");
  }
  if (found) {
    in.found = int_arg(*found, "found");
    if (in.found->size() != in.weights.data.size())
      throw InputError("found: " + std::to_string(in.found->size()) + " integers, the weights have " +
                       std::to_string(in.weights.data.size()));
  }
  const QuantCheckResult r = released([&] { return quant_check(in); });
  return make_result("quant-check", r.to_json(), r.verdict(), reports::quant_check_text);
}

// The defaults of explain, diagnose and quant_check: their C++ input structs' own
// (default-constructed: ExplainInput, DiagnoseInput, QuantSpec and QuantCheckInput), the one place
// they are written; the keyword defaults here and in the Python layer read them
// (_core.explain_defaults, _core.diagnose_defaults, _core.quant_check_defaults).
pyb::dict explain_defaults() {
  const ExplainInput d;
  pyb::dict o;
  add_reference_defaults(o, d.ref_options);
  return o;
}

pyb::dict diagnose_defaults() {
  const DiagnoseInput d;
  pyb::dict o;
  o["stride"] = d.stride;
  o["dilation"] = d.dilation;
  o["arithmetic"] = std::string(d.arithmetic.name());
  o["algorithm"] = d.algorithm.name();
  add_reference_defaults(o, d.ref);
  return o;
}

pyb::dict quant_check_defaults() {
  const QuantCheckInput d;
  pyb::dict o;
  o["bits"] = d.spec.bits;
  o["per_channel"] = d.spec.per_channel;
  o["pow2"] = d.spec.pow2;
  o["rounding"] = std::string(name(d.spec.rounding));
  add_reference_defaults(o, d.ref);
  return o;
}

}  // namespace

void bind_layer(pyb::module_& m) {
  using pyb::arg;
  using pyb::object;
  const pyb::dict e = explain_defaults(), d = diagnose_defaults(), q = quant_check_defaults();
  m.attr("explain_defaults") = e;
  m.attr("diagnose_defaults") = d;
  m.attr("quant_check_defaults") = q;
  m.def("explain", &py_explain, arg("original"), arg("observed"), arg("dtype") = pyb::none(),
        arg("gamma") = pyb::none(), arg("beta") = pyb::none(), arg("mean") = pyb::none(), arg("var") = pyb::none(),
        arg("eps") = pyb::none(), arg("precision") = object(e["precision"]), arg("threads") = object(e["threads"]));
  m.def("diagnose", &py_diagnose, arg("x"), arg("observed"), arg("weight") = pyb::none(), arg("bias") = pyb::none(),
        arg("gamma") = pyb::none(), arg("beta") = pyb::none(), arg("mean") = pyb::none(), arg("var") = pyb::none(),
        arg("eps") = pyb::none(), arg("stride") = object(d["stride"]), arg("padding") = pyb::none(),
        arg("dilation") = object(d["dilation"]), arg("arithmetic") = object(d["arithmetic"]),
        arg("algorithm") = object(d["algorithm"]), arg("precision") = object(d["precision"]),
        arg("threads") = object(d["threads"]));
  m.def("quant_check", &py_quant_check, arg("weight"), arg("found") = pyb::none(), arg("scales") = pyb::none(),
        arg("gamma") = pyb::none(), arg("beta") = pyb::none(), arg("mean") = pyb::none(), arg("var") = pyb::none(),
        arg("eps") = pyb::none(), arg("bits") = object(q["bits"]), arg("per_channel") = object(q["per_channel"]),
        arg("pow2") = object(q["pow2"]), arg("rounding") = object(q["rounding"]),
        arg("precision") = object(q["precision"]), arg("threads") = object(q["threads"]));
}

}  // namespace foldcheck::py
