// A fused conv against its conv and BatchNorm (bind.hpp): fold_check (each engine recipe's bound
// on the weights and bias, fold_check.hpp) and diagnose_fold (the cause of a failure, the
// weight-level diagnosis of diagnosis/fold_diagnosis.hpp), so that foldcheck.testing judges
// and explains a fold through the core alone.
#include <optional>

#include <pybind11/stl.h>

#include "arrays.hpp"
#include "bind.hpp"
#include "bn_args.hpp"
#include "call.hpp"
#include "foldcheck/base/errors.hpp"
#include "foldcheck/diagnosis/fold_diagnosis.hpp"
#include "foldcheck/io/bn_params.hpp"
#include "foldcheck/model/fold_check.hpp"
#include "foldcheck/reports/model_text.hpp"
#include "foldcheck/result/views/accuracy_diff.hpp"
#include "result.hpp"

namespace foldcheck::py {
namespace {

// The conv, its BatchNorm and the fused conv's arrays, checked as fold_check takes them.
struct FoldArgs {
  LayerParams layer;
  ObservedFold observed;
};

std::vector<double> per_channel(const LayerParams& p, const OptArray& a, const char* field) {
  if (!a) return {};
  const Tensor t = tensor_arg(*a, field);
  if (std::string(field) == "bias") require_finite(t, field);  // observed_bias may hold NaN: it is judged
  require_values_of(t, p.dtype, field);
  if (t.size() != p.channels)
    throw InputError(std::string(field) + ": " + std::to_string(t.size()) + " values for " +
                     std::to_string(p.channels) + " channels");
  return t.data;
}

// Channels are axis 0 of the weight; a missing observed bias is all zero.
FoldArgs fold_args(const pyb::array& weight, const OptArray& bias, const OptArray& gamma, const OptArray& beta,
                   const OptArray& mean, const OptArray& var, const pyb::object& eps, const pyb::array& observed_weight,
                   const OptArray& observed_bias) {
  const Tensor w = tensor_arg(weight, "weight"), ow = tensor_arg(observed_weight, "observed_weight");
  require_finite(w, "weight");
  if (w.shape.size() < 2 || w.data.empty()) throw InputError("weight: needs an output-channel axis and a value");
  require_values_of(ow, w.dtype, "observed_weight");
  if (ow.shape != w.shape)
    throw InputError("observed_weight: shape " + shape_string(ow.shape) + ", weight's is " + shape_string(w.shape));
  FoldArgs a;
  LayerParams& p = a.layer;
  p.dtype = w.dtype;
  p.weight_shape = w.shape;
  p.channels = w.shape[0];
  p.per_channel = w.size() / p.channels;
  p.weight = w.data;
  for (std::size_t i = 0; i < w.data.size(); ++i) p.index.push_back(i);
  p.bias = per_channel(p, bias, "bias");
  BnRule rule;
  rule.fresh_defaults = false;
  rule.channels = static_cast<std::size_t>(p.channels);
  rule.dtype = w.dtype;
  BnSources s = bn_sources(gamma, beta, mean, var, eps);
  for (ValueSource* v : {&s.gamma, &s.beta, &s.mean, &s.var})
    if (!v->given()) throw InputError(v->label + ": the fold check needs the BatchNorm's four parameters");
  p.bn = load_bn_params(s, rule).bn;
  a.observed = ObservedFold{ow.data, per_channel(p, observed_bias, "observed_bias")};
  return a;
}

Result py_fold_check(const pyb::array& weight, const OptArray& bias, const OptArray& gamma, const OptArray& beta,
                     const OptArray& mean, const OptArray& var, const pyb::object& eps,
                     const pyb::array& observed_weight, const OptArray& observed_bias, const pyb::object& precision,
                     const pyb::object& threads) {
  const FoldArgs a = fold_args(weight, bias, gamma, beta, mean, var, eps, observed_weight, observed_bias);
  const ref::Options ro = reference_options(precision, threads);
  const FoldCheck f = released([&] { return check_fold(a.layer, a.observed, ro); });
  return make_result("fold-check", to_json(f), f.verdict, [](const nlohmann::json& j) {
    return reports::fold_check_text(result::views::AdiffFold::from_json(j));
  });
}

struct FoldDiagnosis {
  diagnosis::WeightDiagnosis weights;
  diagnosis::BiasDiagnosis bias;
};

const std::vector<double>& array_of(const Result& r, const char* name, std::size_t n) {
  const auto it = r.arrays.find(name);
  if (it == r.arrays.end() || it->second.data.size() != n)
    throw InputError(std::string("explained: not the explain result of these weights (its ") + name + ")");
  return it->second.data;
}

// The cause of a fold's failure: its weights' (explained: explain's result on them, whose
// residuals and bounds in ULP say which elements are beyond the cited recipe's bound) and its
// bias's. Names a cause; the verdicts are explain's and fold_check's.
FoldDiagnosis py_diagnose_fold(const Result& explained, const pyb::array& weight, const OptArray& bias,
                               const OptArray& gamma, const OptArray& beta, const OptArray& mean, const OptArray& var,
                               const pyb::object& eps, const pyb::array& observed_weight,
                               const OptArray& observed_bias) {
  const FoldArgs a = fold_args(weight, bias, gamma, beta, mean, var, eps, observed_weight, observed_bias);
  diagnosis::FoldedConv f{a.layer.dtype,     a.layer.channels, a.layer.per_channel, a.layer.weight,
                          a.observed.weight, a.layer.bias,     a.observed.bias,     a.layer.bn};
  const std::size_t n = f.weight.size();
  const std::vector<double>&res = array_of(explained, "residual_ulp", n), &bound = array_of(explained, "bound_ulp", n);
  std::vector<double> ratio(n);
  for (std::size_t i = 0; i < n; ++i) ratio[i] = bound_ratio(std::fabs(static_cast<long double>(res[i])), bound[i]);
  return released([&] {
    return FoldDiagnosis{diagnosis::diagnose_weights(f, ratio, array_of(explained, "exact", n)),
                         diagnosis::diagnose_bias(f)};
  });
}

pyb::object json_object(const nlohmann::json& j) { return pyb::module_::import("json").attr("loads")(j.dump()); }

void bind_diagnosis_types(pyb::module_& m) {
  using diagnosis::AffineModel;
  pyb::class_<AffineModel>(m, "Hypothesis", "A hypothesis of the catalogue (diagnosis/hypotheses.hpp).")
      .def_readonly("name", &AffineModel::name)
      .def_readonly("description", &AffineModel::description)
      .def_readonly("fix", &AffineModel::fix)
      .def_property_readonly("params", [](const AffineModel& h) { return json_object(h.params); })
      .def_property_readonly("sentence", &diagnosis::slip_sentence)
      .def("__repr__", [](const AffineModel& h) { return "<Hypothesis " + h.name + ">"; });
  using diagnosis::ChannelChange;
  pyb::class_<ChannelChange>(m, "ChannelChange", "One channel beyond its bound (fold_diagnosis.hpp).")
      .def_readonly("channel", &ChannelChange::channel)
      .def_readonly("elements", &ChannelChange::elements)
      .def_readonly("beyond", &ChannelChange::beyond)
      .def_readonly("nonfinite", &ChannelChange::nonfinite)
      .def_readonly("ppm", &ChannelChange::ppm)
      .def("__str__", &ChannelChange::text);
  using diagnosis::WeightDiagnosis;
  pyb::class_<WeightDiagnosis>(m, "WeightDiagnosis", "The cause of folded weights beyond their bound.")
      .def_readonly("worst", &WeightDiagnosis::worst)
      .def_readonly("worst_ratio", &WeightDiagnosis::worst_ratio)
      .def_readonly("channels_beyond", &WeightDiagnosis::channels_beyond)
      .def_readonly("slip", &WeightDiagnosis::slip)
      .def_readonly("shown", &WeightDiagnosis::shown)
      .def_readonly("cause", &WeightDiagnosis::cause);
  using diagnosis::BiasDiagnosis;
  pyb::class_<BiasDiagnosis>(m, "BiasDiagnosis", "The cause of a folded bias beyond its bound.")
      .def_readonly("off", &BiasDiagnosis::off)
      .def_readonly("missing", &BiasDiagnosis::missing)
      .def_readonly("cause", &BiasDiagnosis::cause);
  pyb::class_<FoldDiagnosis>(m, "FoldDiagnosis", "diagnose_fold's result: the weights' cause and the bias's.")
      .def_readonly("weights", &FoldDiagnosis::weights)
      .def_readonly("bias", &FoldDiagnosis::bias);
}

// fold_check's defaults: the reference options' own (ref::Options, default-constructed), the one
// place they are written; the keyword defaults here and in the Python layer read them
// (_core.fold_check_defaults). eps has none here: a missing eps is the BatchNorm loader's.
pyb::dict fold_check_defaults() {
  pyb::dict o;
  add_reference_defaults(o, ref::Options{});
  return o;
}

}  // namespace

void bind_fold(pyb::module_& m) {
  using pyb::arg;
  bind_diagnosis_types(m);
  const pyb::dict f = fold_check_defaults();
  m.attr("fold_check_defaults") = f;
  m.def("fold_check", &py_fold_check, arg("weight"), arg("bias"), arg("gamma"), arg("beta"), arg("mean"), arg("var"),
        arg("eps"), arg("observed_weight"), arg("observed_bias"), arg("precision") = pyb::object(f["precision"]),
        arg("threads") = pyb::object(f["threads"]));
  m.def("diagnose_fold", &py_diagnose_fold, arg("explained"), arg("weight"), arg("bias"), arg("gamma"), arg("beta"),
        arg("mean"), arg("var"), arg("eps"), arg("observed_weight"), arg("observed_bias"));
}

}  // namespace foldcheck::py
