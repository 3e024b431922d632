// BatchNorm parameters from the command line (bn_args.hpp).
#include "bn_args.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "foldcheck/layer/bn_check.hpp"
#include "foldcheck/base/errors.hpp"
#include "foldcheck/io/npy.hpp"
#include "foldcheck/io/number_list.hpp"

namespace foldcheck::cli {

// eps_in_file (if given) tells whether the .npz held an eps.
// max_values: no parameter array may hold more (one per channel; channels <= the weights).
foldcheck::ref::BnParams load_bn(const ExplainArgs& a, bool& given, std::string& source, std::int64_t max_values,
                          bool* eps_in_file) {
  std::vector<double> gamma{1.0}, beta{0.0}, mean{0.0}, var{1.0};
  double eps = 1e-5;
  given = false;
  source = "defaults (fresh BatchNorm: gamma 1, beta 0, mean 0, var 1, eps 1e-5)";
  if (!a.bn_file.empty()) {
    const auto arrays = foldcheck::read_npz(a.bn_file, {"gamma", "beta", "mean", "var", "eps"}, max_values);
    // One value per channel: a [C, 1, 1] or [4, 4] array would be read flat, as 16 channels.
    for (const auto& [key, t] : arrays)
      if (t.shape.size() > 1)
        throw foldcheck::InputError(fmt::format("{}[{}]: shape {}: BatchNorm parameters are one value or one per channel (1-D)",
                                                a.bn_file, key, foldcheck::shape_string(t.shape)));
    if (arrays.count("gamma")) gamma = arrays.at("gamma").data;
    if (arrays.count("beta")) beta = arrays.at("beta").data;
    if (arrays.count("mean")) mean = arrays.at("mean").data;
    if (arrays.count("var")) var = arrays.at("var").data;
    if (eps_in_file) *eps_in_file = arrays.count("eps") > 0;
    if (arrays.count("eps")) {
      if (arrays.at("eps").data.size() != 1) throw foldcheck::InputError(a.bn_file + "[eps]: must hold one value");
      eps = arrays.at("eps").data[0];
    }
    given = true;
    source = a.bn_file;
  }
  if (!a.gamma.empty()) gamma = foldcheck::load_values(a.gamma, "--gamma");
  if (!a.beta.empty()) beta = foldcheck::load_values(a.beta, "--beta");
  if (!a.mean.empty()) mean = foldcheck::load_values(a.mean, "--mean");
  if (!a.var.empty()) var = foldcheck::load_values(a.var, "--var");
  if (a.eps_given) eps = a.eps;
  if (!a.gamma.empty() || !a.beta.empty() || !a.mean.empty() || !a.var.empty() || a.eps_given) {
    given = true;
    source = a.bn_file.empty() ? "flags" : a.bn_file + " and flags";
  }
  std::size_t C = 1;
  for (auto* v : {&gamma, &beta, &mean, &var}) C = std::max(C, v->size());
  for (auto* v : {&gamma, &beta, &mean, &var})
    if (v->size() == 1) v->assign(C, v->front());
  foldcheck::check_bn_params(foldcheck::ref::BnParams{gamma, beta, mean, var, eps}, C, "BatchNorm (" + source + ")");
  return foldcheck::ref::BnParams{gamma, beta, mean, var, eps};
}

}  // namespace foldcheck::cli
