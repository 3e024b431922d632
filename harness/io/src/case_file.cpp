#include "foldcheck/io/case_file.hpp"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>

#include "foldcheck/layer/bn_check.hpp"
#include "foldcheck/base/errors.hpp"
#include "foldcheck/io/input_file.hpp"
#include "foldcheck/io/limits.hpp"
#include "foldcheck/io/npy.hpp"
#include "foldcheck/numerics/quantize.hpp"

namespace foldcheck {
namespace {

using json = nlohmann::json;

struct Ctx {
  std::string path;
  [[noreturn]] void fail(const std::string& field, const std::string& msg) const {
    throw InputError(path + ": " + field + ": " + msg);
  }
};

// The value a name lookup (dtype_from_name, recipe_from_name, ...) gives for `v`, with the
// case file and field in every message: `v` must be a string, and the lookup's own
// InputError ("unknown dtype 'float8' ...") is prefixed with where it came from.
template <class Lookup>
auto by_name(const Ctx& c, const json& v, const std::string& field, Lookup lookup) {
  if (!v.is_string()) c.fail(field, "must be a string");
  try {
    return lookup(v.get<std::string>());
  } catch (const InputError& e) {
    c.fail(field, e.what());
  }
}

// The entries of a list field (InputError unless `v` is a non-empty array).
const json& list_field(const Ctx& c, const json& v, const std::string& field) {
  if (!v.is_array() || v.empty()) c.fail(field, "must be a non-empty list");
  return v;
}

void check_keys(const Ctx& c, const json& j, const std::string& where, const std::set<std::string>& allowed) {
  if (!j.is_object()) c.fail(where, "must be an object");
  for (auto it = j.begin(); it != j.end(); ++it)
    if (!allowed.count(it.key())) c.fail(where, "unknown key '" + it.key() + "'");
}

double number(const Ctx& c, const json& j, const std::string& field) {
  if (!j.is_number()) c.fail(field, "must be a number");
  const double v = j.get<double>();
  if (!std::isfinite(v)) c.fail(field, "must be finite");
  return v;
}

// Geometry integers are capped at 2^31 - 1 so that the output size arithmetic
// (H + pads - dilation*(K - 1) - 1) cannot overflow; tensor sizes are then checked
// against the element limit (limits.hpp).
constexpr std::int64_t kMaxDim = (std::int64_t(1) << 31) - 1;

std::int64_t positive_int(const Ctx& c, const json& j, const std::string& field, std::int64_t min = 1) {
  if (!j.is_number_integer() || (j.is_number_unsigned() && j.get<std::uint64_t>() > std::uint64_t(kMaxDim)) ||
      j.get<std::int64_t>() < min || j.get<std::int64_t>() > kMaxDim)
    c.fail(field, "must be an integer in " + std::to_string(min) + ".." + std::to_string(kMaxDim));
  return j.get<std::int64_t>();
}

std::pair<std::int64_t, std::int64_t> pair_of(const Ctx& c, const json& j, const std::string& field, std::int64_t dflt,
                                              std::int64_t min) {
  if (j.is_null()) return {dflt, dflt};
  if (j.is_number_integer()) {
    const auto v = positive_int(c, j, field, min);
    return {v, v};
  }
  if (!j.is_array() || j.size() != 2) c.fail(field, "must be an integer or a list of two");
  return {positive_int(c, j[0], field, min), positive_int(c, j[1], field, min)};
}

TensorSpec tensor_spec(const Ctx& c, const json& j, const std::string& field) {
  TensorSpec t;
  if (j.is_number()) {
    t.init = json{{"const", number(c, j, field)}};
    return t;
  }
  check_keys(c, j, field, {"init", "prefix"});
  if (!j.contains("init")) c.fail(field, "missing 'init'");
  t.init = j["init"];
  const json& i = t.init;
  if (!i.is_object() || i.size() != 1) c.fail(field + ".init", "must be one of normal, uniform, const, values, npy");
  const std::string kind = i.begin().key();
  const json& a = i.begin().value();
  if (kind == "normal") {
    check_keys(c, a, field + ".init.normal", {"mean", "std"});
    if (number(c, a.value("std", json(1.0)), field + ".init.normal.std") < 0) c.fail(field, "std must be >= 0");
    number(c, a.value("mean", json(0.0)), field + ".init.normal.mean");
  } else if (kind == "uniform") {
    check_keys(c, a, field + ".init.uniform", {"low", "high"});
    for (const char* k : {"low", "high"})
      if (!a.contains(k)) c.fail(field + ".init.uniform", std::string("needs '") + k + "'");
    if (number(c, a.at("low"), field + ".init.uniform.low") > number(c, a.at("high"), field + ".init.uniform.high"))
      c.fail(field, "uniform low > high");
  } else if (kind == "const") {
    number(c, a, field + ".init.const");
  } else if (kind == "values") {
    if (!a.is_array() || a.empty()) c.fail(field + ".init.values", "must be a non-empty list of numbers");
    for (const auto& v : a) number(c, v, field + ".init.values");
  } else if (kind == "npy") {
    if (!a.is_string()) c.fail(field + ".init.npy", "must be a path");
    std::filesystem::path p = a.get<std::string>();
    if (p.is_relative()) p = std::filesystem::path(c.path).parent_path() / p;
    t.init = json{{"npy", p.string()}};
  } else {
    c.fail(field + ".init", "unknown initializer '" + kind + "'");
  }
  if (j.contains("prefix")) {
    if (!j["prefix"].is_array()) c.fail(field + ".prefix", "must be a list of numbers");
    for (const auto& v : j["prefix"]) t.prefix.push_back(number(c, v, field + ".prefix"));
  }
  return t;
}

std::uint64_t fnv1a(const std::string& s) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char ch : s) h = (h ^ ch) * 1099511628211ull;
  return h;
}

// Draw n values of a tensor in dtype t. Uniform doubles use the top 53 bits of the
// 64-bit generator; normals use Box-Muller. Prefix values replace the first drawn ones.
// Every value is checked as it is made, in the type the case computes in (a finite value
// past T's range would become an infinity that is never scored), then rounded to t: a bad
// value is refused having touched only the memory of the values before it.
std::vector<double> draw(const std::string& case_path, const TensorSpec& spec, const std::string& tensor,
                         std::int64_t n, std::uint64_t seed, DType t) {
  if (static_cast<std::int64_t>(spec.prefix.size()) > n)
    throw InputError(case_path + ": " + tensor + ".prefix is longer than the tensor");
  std::vector<double> v;
  v.reserve(static_cast<std::size_t>(n));
  const auto keep = [&](double x) {
    const std::size_t k = v.size();
    if (k < spec.prefix.size()) x = spec.prefix[k];
    if (!std::isfinite(x)) throw InputError(case_path + ": " + tensor + ": contains NaN or Inf");
    const double r = round_to(t, x);
    if (!std::isfinite(r)) throw InputError(case_path + ": " + tensor + ": " + past_range(x, t, fmt::format(" at index {}", k)));
    v.push_back(r);
  };
  const json& i = spec.init;
  const std::string kind = i.begin().key();
  const json& a = i.begin().value();
  std::mt19937_64 rng(seed ^ fnv1a(tensor));
  auto unit = [&] { return static_cast<double>(rng() >> 11) * 0x1p-53; };
  if (kind == "normal") {
    const double mu = a.value("mean", 0.0), sd = a.value("std", 1.0);
    for (std::int64_t k = 0; k < n; ++k) {
      const double u1 = 1.0 - unit(), u2 = unit();
      keep(mu + sd * std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2));
    }
  } else if (kind == "uniform") {
    const double lo = a.at("low").get<double>(), hi = a.at("high").get<double>();
    for (std::int64_t k = 0; k < n; ++k) keep(lo + (hi - lo) * unit());
  } else if (kind == "const") {
    for (std::int64_t k = 0; k < n; ++k) keep(a.get<double>());
  } else if (kind == "values") {
    if (static_cast<std::int64_t>(a.size()) != n)
      throw InputError(case_path + ": " + tensor + ": " + std::to_string(a.size()) + " values given, shape needs " +
                       std::to_string(n));
    for (std::int64_t k = 0; k < n; ++k) keep(a[k].get<double>());
  } else if (kind == "npy") {
    const Tensor f = read_npy(a.get<std::string>());
    if (f.size() != n)
      throw InputError(a.get<std::string>() + ": " + tensor + " has " + std::to_string(f.size()) +
                       " elements, the case needs " + std::to_string(n));
    for (const double x : f.data) keep(x);
  }
  return v;
}

// The BatchNorm of the case in dtype t, checked as the fold computes it.
ref::BnParams draw_bn(const CaseSpec& s, DType t) {
  const std::int64_t O = s.geometry.O;
  ref::BnParams bn{draw(s.path, s.gamma, "bn.gamma", O, s.seed, t), draw(s.path, s.beta, "bn.beta", O, s.seed, t),
                   draw(s.path, s.mean, "bn.mean", O, s.seed, t), draw(s.path, s.var, "bn.var", O, s.seed, t), s.eps};
  check_bn_params_in(bn, static_cast<std::size_t>(O), t, s.path + ": bn");
  return bn;
}

// What load_case can check of a tensor without drawing all of it: values given in the
// file (bounded by its size) are drawn; a constant and a uniform range are checked at
// their ends. Normal draws are checked value by value when the case is materialized.
void check_tensor_values(const CaseSpec& s, const TensorSpec& spec, const std::string& tensor, std::int64_t n, DType t) {
  const std::string kind = spec.init.begin().key();
  const json& a = spec.init.begin().value();
  if (kind == "values" || kind == "npy") {
    (void)draw(s.path, spec, tensor, n, s.seed, t);
    return;
  }
  std::vector<double> ends = spec.prefix;
  if (kind == "const") ends.push_back(a.get<double>());
  if (kind == "uniform") ends.insert(ends.end(), {a.at("low").get<double>(), a.at("high").get<double>()});
  for (const double x : ends)
    if (const std::string bad = past_range(x, t); !bad.empty()) throw InputError(s.path + ": " + tensor + ": " + bad);
}

}  // namespace

CaseSpec load_case(const std::string& path) { return load_case(read_json_input(path, "case file"), path); }

namespace {
CaseSpec load_case_fields(const json& j, const std::string& path);
}  // namespace

// Every field is checked where it is read, with its name in the message. A value of a
// type no check foresaw still surfaces as nlohmann's exception: it is bad input too, and
// is named by the case file here rather than as a bare "[json.exception...]".
CaseSpec load_case(const json& j, const std::string& path) {
  try {
    return load_case_fields(j, path);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(path + ": case: " + json_error_reason(e));
  } catch (const JsonAccessError&) {
    throw InputError(path + ": case: a value is missing");
  }
}

namespace {

// name, description and seed.
void read_header(const Ctx& c, const json& j, CaseSpec& s) {
  for (const char* k : {"name", "description"})
    if (j.contains(k) && !j[k].is_string()) c.fail(k, "must be a string");
  s.name = j.value("name", std::filesystem::path(s.path).stem().string());
  s.description = j.value("description", "");
  if (!j.contains("seed") || !j["seed"].is_number_unsigned()) c.fail("seed", "required, a non-negative integer");
  s.seed = j["seed"].get<std::uint64_t>();
}

// conv.padding: one value, a (top/bottom, left/right) pair, or [top, left, bottom, right].
void read_padding(const Ctx& c, const json& cv, ref::ConvGeometry& g) {
  const json pad = cv.value("padding", json(0));
  if (pad.is_array() && pad.size() == 4) {
    g.pad_top = positive_int(c, pad[0], "conv.padding", 0);
    g.pad_left = positive_int(c, pad[1], "conv.padding", 0);
    g.pad_bottom = positive_int(c, pad[2], "conv.padding", 0);
    g.pad_right = positive_int(c, pad[3], "conv.padding", 0);
  } else {
    std::tie(g.pad_top, g.pad_left) = pair_of(c, pad, "conv.padding", 0, 0);
    g.pad_bottom = g.pad_top;
    g.pad_right = g.pad_left;
  }
}

// The "conv" object: the geometry's channels, kernel, stride, dilation, groups, padding and bias flag.
void read_conv(const Ctx& c, const json& j, CaseSpec& s) {
  if (!j.contains("conv")) c.fail("conv", "required");
  const json& cv = j["conv"];
  check_keys(c, cv, "conv", {"in_channels", "out_channels", "kernel", "stride", "padding", "dilation", "groups", "bias"});
  auto& g = s.geometry;
  g.C = positive_int(c, cv.value("in_channels", json()), "conv.in_channels");
  g.O = positive_int(c, cv.value("out_channels", json()), "conv.out_channels");
  std::tie(g.KH, g.KW) = pair_of(c, cv.value("kernel", json()), "conv.kernel", 1, 1);
  std::tie(g.stride_h, g.stride_w) = pair_of(c, cv.value("stride", json()), "conv.stride", 1, 1);
  std::tie(g.dil_h, g.dil_w) = pair_of(c, cv.value("dilation", json()), "conv.dilation", 1, 1);
  g.groups = cv.contains("groups") ? positive_int(c, cv["groups"], "conv.groups") : 1;
  read_padding(c, cv, g);
  if (g.C % g.groups || g.O % g.groups) c.fail("conv.groups", "must divide in_channels and out_channels");
  s.conv_bias = cv.value("bias", false);
}

// The "input" object: its shape (against the conv, and the tensor sizes it implies) and its values.
void read_input(const Ctx& c, const json& j, CaseSpec& s) {
  auto& g = s.geometry;
  if (!j.contains("input")) c.fail("input", "required");
  check_keys(c, j["input"], "input", {"shape", "init", "prefix"});
  const json& shp = j["input"].value("shape", json());
  if (!shp.is_array() || shp.size() != 4) c.fail("input.shape", "must be [N, C, H, W]");
  g.N = positive_int(c, shp[0], "input.shape");
  if (positive_int(c, shp[1], "input.shape") != g.C) c.fail("input.shape", "C does not match conv.in_channels");
  g.H = positive_int(c, shp[2], "input.shape");
  g.W = positive_int(c, shp[3], "input.shape");
  if (g.OH() <= 0 || g.OW() <= 0) c.fail("conv", "kernel larger than the padded input");
  checked_element_count({g.N, g.C, g.H, g.W}, s.path + ": input");
  checked_element_count({g.O, g.C / g.groups, g.KH, g.KW}, s.path + ": weights");
  checked_element_count({g.N, g.O, g.OH(), g.OW()}, s.path + ": output");
  json in_spec = j["input"];
  in_spec.erase("shape");
  s.input = tensor_spec(c, in_spec, "input");
}

// "weights", and "conv_bias" exactly when conv.bias is true.
void read_weights(const Ctx& c, const json& j, CaseSpec& s) {
  if (!j.contains("weights")) c.fail("weights", "required");
  s.weights = tensor_spec(c, j["weights"], "weights");
  if (s.conv_bias) {
    if (!j.contains("conv_bias")) c.fail("conv_bias", "required when conv.bias is true");
    s.bias = tensor_spec(c, j["conv_bias"], "conv_bias");
  } else if (j.contains("conv_bias")) {
    c.fail("conv_bias", "given but conv.bias is false");
  }
}

// The "bn" object (each field defaulted: the identity BatchNorm, eps 1e-5).
void read_bn(const Ctx& c, const json& j, CaseSpec& s) {
  const json bn = j.value("bn", json::object());
  check_keys(c, bn, "bn", {"gamma", "beta", "mean", "var", "eps"});
  s.gamma = tensor_spec(c, bn.value("gamma", json(1.0)), "bn.gamma");
  s.beta = tensor_spec(c, bn.value("beta", json(0.0)), "bn.beta");
  s.mean = tensor_spec(c, bn.value("mean", json(0.0)), "bn.mean");
  s.var = tensor_spec(c, bn.value("var", json(1.0)), "bn.var");
  s.eps = number(c, bn.value("eps", json(1e-5)), "bn.eps");  // > 0: check_bn_params in materialize
}

// compare.accumulation: each order by name, checked against the geometry.
void read_accumulations(const Ctx& c, const json& cmp, CaseSpec& s) {
  s.accumulations.clear();
  for (const auto& a : list_field(c, cmp["accumulation"], "compare.accumulation")) {
    if (!a.is_string()) c.fail("compare.accumulation", "entries must be strings");
    try {
      s.accumulations.push_back(order_from_name(a.get<std::string>()));
      check_order(s.accumulations.back(), s.geometry);
    } catch (const InputError& e) {
      c.fail("compare.accumulation", e.what());
    }
  }
}

// compare.variants: a non-empty list of arithmetic objects.
void read_variants(const Ctx& c, const json& cmp, CaseSpec& s) {
  s.variants.clear();
  if (!cmp["variants"].is_array()) c.fail("compare.variants", "must be a list of objects");
  for (const auto& v : cmp["variants"]) {
    check_keys(c, v, "compare.variants[]",
               {"fma", "rsqrt", "newton_steps", "weight_dtype", "conv_arithmetic", "conversion"});
    const json steps = v.value("newton_steps", json(-1));
    if (!steps.is_number_integer()) c.fail("compare.variants[].newton_steps", "must be an integer");
    if (v.contains("fma") && !v["fma"].is_boolean()) c.fail("compare.variants[].fma", "must be true or false");
    for (const char* k : {"rsqrt", "weight_dtype", "conv_arithmetic", "conversion"})
      if (v.contains(k) && !v[k].is_string()) c.fail(std::string("compare.variants[].") + k, "must be a string");
    try {
      s.variants.push_back(arithmetic_from_json_fields(v.value("fma", false), v.value("rsqrt", std::string("exact")),
                                                       steps.get<int>(), v.value("weight_dtype", std::string())));
      if (v.contains("conversion") && !v.contains("conv_arithmetic"))
        throw InputError(R"("conversion" needs a "conv_arithmetic" (tf32, bf16 or fp16))");
      set_conv_operands(s.variants.back(), v.value("conv_arithmetic", std::string("float32")),
                        v.value("conversion", std::string()));
    } catch (const InputError& e) {
      c.fail("compare.variants[]", e.what());
    }
  }
  if (s.variants.empty()) c.fail("compare.variants", "needs at least one variant ({} is the default arithmetic)");
}

// The "compare" object: dtypes, recipes, accumulation orders, variants and the BatchNorm form.
void read_compare(const Ctx& c, const json& j, CaseSpec& s) {
  const json cmp = j.value("compare", json::object());
  check_keys(c, cmp, "compare", {"dtypes", "recipes", "accumulation", "bn_form", "variants"});
  if (cmp.contains("dtypes")) {
    s.dtypes.clear();
    for (const auto& d : list_field(c, cmp["dtypes"], "compare.dtypes"))
      s.dtypes.push_back(by_name(c, d, "compare.dtypes", [](const std::string& n) { return dtype_from_name(n); }));
  }
  s.recipes = all_recipes();
  if (cmp.contains("recipes")) {
    s.recipes.clear();
    for (const auto& r : list_field(c, cmp["recipes"], "compare.recipes"))
      s.recipes.push_back(by_name(c, r, "compare.recipes", [](const std::string& n) { return recipe_from_name(n); }));
  }
  if (cmp.contains("accumulation")) read_accumulations(c, cmp, s);
  if (cmp.contains("variants")) read_variants(c, cmp, s);
  if (cmp.contains("bn_form"))
    s.bn_form = by_name(c, cmp["bn_form"], "compare.bn_form", [](const std::string& n) { return bn_form_from_name(n); });
  if (s.dtypes.empty() || s.accumulations.empty()) c.fail("compare", "needs at least one dtype and accumulation order");
}

// The "observed_weights" object: a prefix of the weights as an engine stored them, and a note.
void read_observed_weights(const Ctx& c, const json& o, CaseSpec& s) {
  check_keys(c, o, "observed_weights", {"prefix", "note"});
  std::vector<double> v;
  for (const auto& x : o.value("prefix", json::array())) v.push_back(number(c, x, "observed_weights.prefix"));
  if (v.empty()) c.fail("observed_weights.prefix", "must be a non-empty list");
  // Observed weights are values of the first compared dtype: one past its range is refused
  // as in explain, not turned into an infinity.
  if (const std::string bad = first_overflow(v, s.dtypes.front()); !bad.empty())
    c.fail("observed_weights.prefix", bad);
  const std::int64_t n_weights = s.geometry.O * s.geometry.terms_per_output();
  if (static_cast<std::int64_t>(v.size()) > n_weights)
    c.fail("observed_weights.prefix", std::to_string(v.size()) + " values but the weights have " +
                                          std::to_string(n_weights));
  s.observed_weights_prefix = v;
  if (o.contains("note") && !o["note"].is_string()) c.fail("observed_weights.note", "must be a string");
  s.observed_note = o.value("note", "");
}

// The "quantize" object: bits, per_channel, pow2 and rounding.
QuantSpec read_quantize(const Ctx& c, const json& qz) {
  check_keys(c, qz, "quantize", {"bits", "per_channel", "pow2", "rounding"});
  QuantSpec q;
  if (qz.contains("bits")) {
    if (!qz["bits"].is_number_integer() || qz["bits"].get<int>() < 2 || qz["bits"].get<int>() > 16)
      c.fail("quantize.bits", "must be an integer 2..16");
    q.bits = qz["bits"].get<int>();
  }
  if (qz.contains("per_channel")) q.per_channel = qz["per_channel"].get<bool>();
  if (qz.contains("pow2")) q.pow2 = qz["pow2"].get<bool>();
  if (qz.contains("rounding"))
    q.rounding = by_name(c, qz["rounding"], "quantize.rounding", [](const std::string& n) { return quant_rounding_from_name(n); });
  return q;
}

// Validate the values in every compared dtype before any run: the BatchNorm as the fold
// computes it, the input and weights as far as they can be without drawing them all.
void check_values_in_dtypes(const CaseSpec& s) {
  const auto& g = s.geometry;
  for (const DType t : s.dtypes) {
    (void)draw_bn(s, t);
    check_tensor_values(s, s.input, "input", g.N * g.C * g.H * g.W, t);
    check_tensor_values(s, s.weights, "weights", g.O * (g.C / g.groups) * g.KH * g.KW, t);
    if (s.conv_bias) check_tensor_values(s, s.bias, "conv_bias", g.O, t);
  }
}

// The case's fields in file order, each checked as it is read.
CaseSpec load_case_fields(const json& j, const std::string& path) {
  Ctx c{path};
  check_keys(c, j, "case", {"name", "description", "seed", "conv", "input", "weights", "conv_bias", "bn", "compare",
                            "observed_weights", "quantize"});
  CaseSpec s;
  s.path = path;
  read_header(c, j, s);
  read_conv(c, j, s);
  read_input(c, j, s);
  read_weights(c, j, s);
  read_bn(c, j, s);
  read_compare(c, j, s);
  if (j.contains("observed_weights")) read_observed_weights(c, j["observed_weights"], s);
  if (j.contains("quantize")) s.quantize = read_quantize(c, j["quantize"]);
  check_values_in_dtypes(s);
  return s;
}
}  // namespace

CaseData materialize(const CaseSpec& s, DType t) {
  const auto& g = s.geometry;
  CaseData d;
  d.graph.dtype = t;
  d.input = draw(s.path, s.input, "input", g.N * g.C * g.H * g.W, s.seed, t);
  Node conv;
  conv.kind = Node::Kind::Conv;
  conv.name = "conv";
  conv.geometry = g;
  conv.weight.dtype = t;
  conv.weight.shape = {g.O, g.C / g.groups, g.KH, g.KW};
  conv.weight.data = draw(s.path, s.weights, "weights", element_count(conv.weight.shape), s.seed, t);
  if (s.conv_bias) conv.bias = draw(s.path, s.bias, "conv_bias", g.O, s.seed, t);
  Node bn;
  bn.kind = Node::Kind::BatchNorm;
  bn.name = "bn";
  bn.geometry = g;
  bn.bn = draw_bn(s, t);
  d.graph.nodes = {conv, bn};
  return d;
}

}  // namespace foldcheck
