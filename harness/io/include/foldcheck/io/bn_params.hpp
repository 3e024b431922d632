#pragma once
// BatchNorm parameters from files and values: the one loader every command uses
// (explain, diagnose, bisect, quant-check), with one rule.
//
// The rule:
//  1. An .npz (BnSources::file) may hold gamma, beta, mean, var (each 1-D: one value, or one
//     per channel) and eps (one value); any other key is refused, and so is an array with more
//     than BnRule::max_values values (from its header, before its data is read).
//  2. A parameter given on its own (BnSources::gamma ... eps: a value list or a .npy) replaces
//     the archive's.
//  3. A parameter given nowhere takes a fresh BatchNorm's value (gamma 1, beta 0, mean 0,
//     var 1, eps 1e-5) and is listed in LoadedBn::defaulted — unless BnRule::fresh_defaults is
//     false, where a missing gamma/beta/mean/var is refused ("FILE: no 'beta' array"; eps keeps
//     its default: engines' exports often leave it out).
//  4. A one-value parameter is broadcast to BnRule::channels (or, without it, to the largest
//     count given); every parameter must then hold that many values.
//  5. Values are checked by check_bn_params (finite, var >= 0, eps > 0, the counts); with
//     BnRule::dtype, as the fold computes in that dtype (check_bn_params_in), after the values
//     are kept, rounded to it, or required to be its values exactly (BnRule::values).
// Errors name the parameter and the file or the label the caller gave the value (the CLI
// gives its flag); messages start with "BatchNorm (SOURCE)".
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "foldcheck/numerics/dtype.hpp"
#include "foldcheck/reference/layer.hpp"

namespace foldcheck {

// One parameter's own source: a comma list or a .npy path, and what to call it in messages.
// Or the values themselves (a library caller's array: `values`, named by `label`).
struct ValueSource {
  std::string text, label;
  std::optional<std::vector<double>> values;
  bool given() const { return !text.empty() || values.has_value(); }
};

struct BnSources {
  std::string file;  // .npz, or "" for none
  ValueSource gamma, beta, mean, var;
  std::optional<double> eps;
  std::string given_as = "flags";  // what the source names values given one by one (the CLI's flags)
  // An .npz alone.
  static BnSources archive(const std::string& path) {
    BnSources s;
    s.file = path;
    return s;
  }
};

enum class BnValues {
  Keep,     // as read
  Round,    // rounded to BnRule::dtype after refusing one past its range (values typed as text)
  Exact,    // each value must be a value of BnRule::dtype (eps exempt: a scalar attribute the recipes model)
};

struct BnRule {
  bool fresh_defaults = true;
  std::int64_t max_values = 0;           // > 0: no parameter may hold more values
  std::optional<std::size_t> channels;   // broadcast target of one-value parameters
  std::optional<DType> dtype;            // checked as computed in this dtype
  BnValues values = BnValues::Keep;
};

struct LoadedBn {
  ref::BnParams bn;
  bool given = false;                    // any parameter came from a file or a value
  std::string source;                    // "FILE", "flags", "FILE and flags", or the defaults
  bool eps_in_file = false;              // the .npz held an eps
  std::vector<std::string> defaulted;    // "beta 0", "eps 1e-5", ...: parameters given nowhere
};

LoadedBn load_bn_params(const BnSources& sources, const BnRule& rule);

}  // namespace foldcheck
