// The one BatchNorm-parameter loader (io/bn_params.hpp): each clause of its rule, as every
// command (explain, diagnose, bisect, quant-check) meets it.
#include <catch2/catch.hpp>
#include <filesystem>
#include <unistd.h>

#include "foldcheck/base/errors.hpp"
#include "foldcheck/io/bn_params.hpp"
#include "foldcheck/io/npy.hpp"

namespace fs = std::filesystem;
using foldcheck::BnRule;
using foldcheck::BnSources;
using foldcheck::BnValues;
using foldcheck::DType;
using foldcheck::InputError;
using foldcheck::Tensor;
using foldcheck::load_bn_params;

namespace {

// An .npz holding `arrays`, in a directory of this process removed at its exit.
struct ScratchDir {
  fs::path path = fs::temp_directory_path() / ("foldcheck_bn_params_" + std::to_string(::getpid()));
  ScratchDir() { fs::create_directories(path); }
  ~ScratchDir() { fs::remove_all(path); }
};
std::string archive(const std::map<std::string, Tensor>& arrays) {
  static ScratchDir dir;
  static int n = 0;
  const std::string path = (dir.path / ("bn" + std::to_string(n++) + ".npz")).string();
  foldcheck::write_npz(path, arrays);
  return path;
}
Tensor f64(std::vector<double> v) { return Tensor{{static_cast<std::int64_t>(v.size())}, v, DType::Float64}; }

}  // namespace

TEST_CASE("bn_params: parameters given nowhere take a fresh BatchNorm's values, and are listed") {
  const std::string f = archive({{"gamma", f64({2, 3})}, {"var", f64({4, 5})}});
  const auto r = load_bn_params(BnSources::archive(f), BnRule{});
  CHECK(r.bn.gamma == std::vector<double>{2, 3});
  CHECK(r.bn.beta == std::vector<double>{0, 0});  // broadcast to the largest count
  CHECK(r.bn.mean == std::vector<double>{0, 0});
  CHECK(r.bn.eps == 1e-5);
  CHECK(r.defaulted == std::vector<std::string>{"beta 0", "mean 0", "eps 1e-5"});
  CHECK(r.given);
  CHECK(r.source == f);
  CHECK_FALSE(r.eps_in_file);
}

TEST_CASE("bn_params: without fresh defaults a missing array is refused, eps excepted") {
  BnRule rule;
  rule.fresh_defaults = false;
  const std::string partial = archive({{"gamma", f64({1})}, {"beta", f64({0})}, {"mean", f64({0})}});
  CHECK_THROWS_WITH(load_bn_params(BnSources::archive(partial), rule), partial + ": no 'var' array");
  const std::string whole = archive({{"gamma", f64({1})}, {"beta", f64({0})}, {"mean", f64({0})}, {"var", f64({1})}});
  const auto r = load_bn_params(BnSources::archive(whole), rule);
  CHECK(r.defaulted == std::vector<std::string>{"eps 1e-5"});
}

TEST_CASE("bn_params: a value given on its own replaces the archive's, and the source says both") {
  const std::string f = archive({{"gamma", f64({2, 3})}, {"eps", f64({1e-3})}});
  BnSources s = BnSources::archive(f);
  s.gamma = {"7,8", "--gamma"};
  s.eps = 1e-2;
  const auto r = load_bn_params(s, BnRule{});
  CHECK(r.bn.gamma == std::vector<double>{7, 8});
  CHECK(r.bn.eps == 1e-2);
  CHECK(r.eps_in_file);
  CHECK(r.source == f + " and flags");
  s.gamma = {"7,x", "--gamma"};  // the caller's label names the value in messages
  CHECK_THROWS_WITH(load_bn_params(s, BnRule{}), Catch::Contains("--gamma"));
}

TEST_CASE("bn_params: arrays are 1-D, eps one value, counts one or the channels") {
  const std::string two_d = archive({{"gamma", Tensor{{2, 1}, {1, 1}, DType::Float32}}});
  CHECK_THROWS_WITH(load_bn_params(BnSources::archive(two_d), BnRule{}),
                    two_d + "[gamma]: shape [2, 1]: BatchNorm parameters are one value or one per channel (1-D)");
  const std::string eps2 = archive({{"eps", f64({1e-5, 1e-3})}});
  CHECK_THROWS_WITH(load_bn_params(BnSources::archive(eps2), BnRule{}), eps2 + "[eps]: must hold one value");
  const std::string three = archive({{"gamma", f64({1, 2, 3})}});
  BnRule rule;
  rule.channels = 4;
  CHECK_THROWS_WITH(load_bn_params(BnSources::archive(three), rule),
                    "BatchNorm (" + three + "): gamma has 3 values for 4 channels");
  rule.channels = 3;
  CHECK(load_bn_params(BnSources::archive(three), rule).bn.var == std::vector<double>{1, 1, 1});
  rule.max_values = 2;  // refused from the header, before the data is read
  CHECK_THROWS_WITH(load_bn_params(BnSources::archive(three), rule), Catch::Contains("more than the 2"));
}

TEST_CASE("bn_params: values in the dtype — kept, rounded, or required exactly (eps exempt)") {
  BnSources s;
  s.gamma = {"0.1", "--gamma"};
  s.eps = 1e-3;  // not a float32 value: exempt
  BnRule rule;
  rule.dtype = DType::Float32;
  CHECK(load_bn_params(s, rule).bn.gamma[0] == 0.1);  // Keep
  rule.values = BnValues::Round;
  CHECK(load_bn_params(s, rule).bn.gamma[0] == static_cast<double>(0.1f));
  rule.values = BnValues::Exact;
  CHECK_THROWS_WITH(load_bn_params(s, rule), "--gamma: value 0.10000000000000001 is not exactly a float32 value (the layer's dtype)");
  s.gamma = {"1e40", "--gamma"};
  rule.values = BnValues::Round;
  CHECK_THROWS_WITH(load_bn_params(s, rule), Catch::Contains("BatchNorm (flags): gamma: 1e+40 at index 0 is past float32's range"));
  s.gamma = {"1", "--gamma"};
  s.var = {"0", "--var"};
  s.eps = 1e-50;  // > 0 in double, 0 in float32: var + eps checked as computed
  CHECK_THROWS_WITH(load_bn_params(s, rule), Catch::Contains("var + eps is 0 in float32"));
}

TEST_CASE("bn_params: nothing given is a fresh BatchNorm, named as such") {
  const auto r = load_bn_params(BnSources{}, BnRule{});
  CHECK_FALSE(r.given);
  CHECK(r.bn.gamma == std::vector<double>{1});
  CHECK(r.source.rfind("defaults (fresh BatchNorm", 0) == 0);
}
