// BatchNorm parameters from files and values (bn_params.hpp: the rule).
#include "foldcheck/io/bn_params.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "foldcheck/base/errors.hpp"
#include "foldcheck/io/npy.hpp"
#include "foldcheck/io/number_list.hpp"
#include "foldcheck/layer/bn_check.hpp"

namespace foldcheck {
namespace {

struct Param {
  const char* key;
  const char* fresh_text;
  double fresh;
  std::vector<double> ref::BnParams::*member;
  ValueSource BnSources::*source;
};
constexpr std::array<Param, 4> kParams{{{"gamma", "1", 1.0, &ref::BnParams::gamma, &BnSources::gamma},
                                        {"beta", "0", 0.0, &ref::BnParams::beta, &BnSources::beta},
                                        {"mean", "0", 0.0, &ref::BnParams::mean, &BnSources::mean},
                                        {"var", "1", 1.0, &ref::BnParams::var, &BnSources::var}}};

// Rule 1: the archive's arrays, each 1-D.
std::map<std::string, Tensor> read_archive(const std::string& file, std::int64_t max_values) {
  auto arrays = read_npz(file, {"gamma", "beta", "mean", "var", "eps"}, max_values);
  // One value per channel: a [C, 1, 1] or [4, 4] array would be read flat, as 16 channels.
  for (const auto& [key, t] : arrays)
    if (t.shape.size() > 1)
      throw InputError(fmt::format("{}[{}]: shape {}: BatchNorm parameters are one value or one per channel (1-D)", file,
                                   key, shape_string(t.shape)));
  if (arrays.count("eps") && arrays.at("eps").data.size() != 1) throw InputError(file + "[eps]: must hold one value");
  return arrays;
}

std::string source_name(const BnSources& s, bool values_given) {
  if (values_given) return s.file.empty() ? s.given_as : s.file + " and " + s.given_as;
  if (!s.file.empty()) return s.file;
  return "defaults (fresh BatchNorm: gamma 1, beta 0, mean 0, var 1, eps 1e-5)";
}

// Rule 5 for BnValues::Round and Exact.
void to_dtype(LoadedBn& r, const BnSources& s, DType t, BnValues mode) {
  const std::string what = "BatchNorm (" + r.source + ")";
  for (const Param& p : kParams) {
    std::vector<double>& v = r.bn.*p.member;
    if (mode == BnValues::Round) {
      if (const std::string bad = first_overflow(v, t); !bad.empty())
        throw InputError(fmt::format("{}: {}: {}", what, p.key, bad));
      for (double& x : v) x = round_to(t, x);
    } else {
      const std::string where = (s.*p.source).given() ? (s.*p.source).label : s.file + "[" + p.key + "]";
      for (const double x : v)
        if (round_to(t, x) != x)
          throw InputError(fmt::format("{}: value {:.17g} is not exactly a {} value (the layer's dtype)", where, x, name(t)));
    }
  }
}

}  // namespace

LoadedBn load_bn_params(const BnSources& s, const BnRule& rule) {
  LoadedBn r;
  r.bn.eps = 1e-5;
  std::map<std::string, Tensor> arrays;
  if (!s.file.empty()) arrays = read_archive(s.file, rule.max_values);
  bool values_given = s.eps.has_value();
  for (const Param& p : kParams) {
    std::vector<double>& v = r.bn.*p.member;
    const ValueSource& own = s.*p.source;
    if (own.given()) {
      v = own.values ? *own.values : load_values(own.text, own.label);
      values_given = true;
    } else if (arrays.count(p.key)) {
      v = arrays.at(p.key).data;
    } else if (rule.fresh_defaults || s.file.empty()) {
      v = {p.fresh};
      r.defaulted.push_back(fmt::format("{} {}", p.key, p.fresh_text));
    } else {
      throw InputError(fmt::format("{}: no '{}' array", s.file, p.key));
    }
  }
  r.eps_in_file = arrays.count("eps") > 0;
  if (s.eps) r.bn.eps = *s.eps;
  else if (r.eps_in_file) r.bn.eps = arrays.at("eps").data[0];
  else r.defaulted.push_back("eps 1e-5");
  r.given = !s.file.empty() || values_given;
  r.source = source_name(s, values_given);
  // Rule 4: one value for every channel.
  std::size_t C = 1;
  for (const Param& p : kParams) C = std::max(C, (r.bn.*p.member).size());
  if (rule.channels) C = *rule.channels;
  for (const Param& p : kParams)
    if (std::vector<double>& v = r.bn.*p.member; v.size() == 1) v.assign(C, v.front());
  // Rule 5: the values as given, then in the dtype the fold computes in.
  const std::string what = "BatchNorm (" + r.source + ")";
  check_bn_params(r.bn, C, what);
  if (!rule.dtype) return r;
  if (rule.values != BnValues::Keep) to_dtype(r, s, *rule.dtype, rule.values);
  check_bn_params_in(r.bn, C, *rule.dtype, what);
  return r;
}

}  // namespace foldcheck
