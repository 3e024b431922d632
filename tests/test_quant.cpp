// Fold, then quantize (quantize.hpp, quant_check.hpp): exact rounding decisions at ties,
// near-tie flips of correct recipes reported as EXPECTED, wrong integers as UNEXPECTED.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <random>
#include <set>

#include "foldcheck/io/npy.hpp"
#include "foldcheck/quant/quant_check.hpp"
#include "foldcheck/quant/quant_layer.hpp"

using namespace foldcheck;
using json = nlohmann::json;

TEST_CASE("quantize: exact decisions at and near ties, both roundings, clamping", "[quant]") {
  QuantSpec q;
  const double s = 0x1p-7;
  // Exactly on ties: 2.5 and -2.5 steps, 3.5.
  CHECK(quantize_exact({2.5 * s, 0}, s, q).q == 2);
  CHECK(quantize_exact({-2.5 * s, 0}, s, q).q == -2);
  CHECK(quantize_exact({3.5 * s, 0}, s, q).q == 4);
  CHECK(quantize_exact({2.5 * s, 0}, s, q).tie_distance == 0);
  q.rounding = QuantRounding::HalfAway;
  CHECK(quantize_exact({2.5 * s, 0}, s, q).q == 3);
  CHECK(quantize_exact({-2.5 * s, 0}, s, q).q == -3);
  q.rounding = QuantRounding::HalfEven;
  // A hair above or below the tie, carried only by the low part of the double-double.
  CHECK(quantize_exact({2.5 * s, 1e-30}, s, q).q == 3);
  CHECK(quantize_exact({2.5 * s, -1e-30}, s, q).q == 2);
  CHECK(quantize_exact({2.5 * s, 1e-30}, s, q).tie_distance < 1e-20);
  // An integer is half a step from both ties; clamping at qmax.
  CHECK(quantize_exact({7 * s, 0}, s, q).tie_distance == 0.5);
  CHECK(quantize_exact({500 * s, 0}, s, q).q == 127);
  CHECK(quantize_exact({-500 * s, 0}, s, q).q == -127);
  q.bits = 4;
  CHECK(quantize_exact({500 * s, 0}, s, q).q == 7);
  // A free (non power-of-two) scale: 0.3 / 0.1 is 3 to ~1e-16, far from a tie.
  q.bits = 8;
  CHECK(quantize_exact({0.3, 0}, 0.1, q).q == 3);
  CHECK(quantize_value(2.5 * s, s, q) == 2);
  // Scales: power of two covering max |x| / 127; per channel.
  CHECK(quant_scales({1.0, -2.0}, 1, q) == std::vector<double>{0x1p-5});
  q.per_channel = true;
  CHECK(quant_scales({1.0, -2.0}, 1, q) == (std::vector<double>{0x1p-6, 0x1p-5}));
}

namespace {

// Weights whose exact fold lies within about one float32 ULP of a rounding tie: w is the
// float nearest to (k + 1/2) s / t for the channel's exact scale t.
QuantCheckInput near_tie_layer(std::size_t channels, std::size_t per) {
  QuantCheckInput in;
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> g(0.5, 1.5), v(0.05, 2.0);
  std::uniform_int_distribution<int> k(-100, 100);
  in.bn.eps = static_cast<float>(1e-5);
  for (std::size_t o = 0; o < channels; ++o) {
    in.bn.gamma.push_back(static_cast<float>(g(rng)));
    in.bn.beta.push_back(0);
    in.bn.mean.push_back(0);
    in.bn.var.push_back(static_cast<float>(v(rng)));
  }
  in.spec.per_channel = true;
  in.scales = std::vector<double>(channels, 0x1p-6);
  in.weights.shape = {static_cast<std::int64_t>(channels), static_cast<std::int64_t>(per)};
  for (std::size_t o = 0; o < channels; ++o) {
    const double t = in.bn.gamma[o] / std::sqrt(in.bn.var[o] + in.bn.eps);
    for (std::size_t i = 0; i < per; ++i) in.weights.data.push_back(static_cast<float>((k(rng) + 0.5) * 0x1p-6 / t));
  }
  return in;
}

}  // namespace

TEST_CASE("quant-check: correct recipes' flips at near ties are EXPECTED, wrong integers UNEXPECTED", "[quant]") {
  const QuantCheckInput base = near_tie_layer(16, 256);
  const json r = quant_check(base).to_json();
  CHECK(r["verdict"] == "EXPECTED");
  CHECK(r["expected_summary"]["near_tie"].get<std::int64_t>() > 100);
  std::size_t flips = 0;
  std::set<std::string> stages;
  for (const json& rc : r["recipes"])
    for (const json& f : rc["flips"]) {
      ++flips;
      CHECK(std::llabs(f["recipe"].get<std::int64_t>() - f["expected"].get<std::int64_t>()) == 1);
      CHECK(f["tie_distance"].get<double>() < 1e-4);
      CHECK((f["stage"] == "rsqrt" || f["stage"] == "fold_order" || f["stage"] == "multiply" || f["stage"] == "storage"));
      stages.insert(f["stage"].get<std::string>());
    }
  CHECK(flips > 10);  // near ties do flip under correct float folds
  CHECK(stages.size() >= 2);  // and not all for the same reason
  // Each recipe's integers, checked as dumped integers: every flip is an EXPECTED one.
  for (const char* fold : {"exact", "pytorch", "tvm", "onnxruntime", "onnxoptimizer"}) {
    QuantCheckInput in = base;
    in.found = quantized_fold(base, fold).q;
    const json c = quant_check(in).to_json();
    INFO(fold);
    CHECK(c["verdict"] == "EXPECTED");
    CHECK(c["mismatch_counts"]["unexpected"] == 0);
    if (std::string(fold) == "exact") CHECK(c["mismatches"].empty());
  }
  // Off by two at a near tie, off by one far from any tie, off by three: UNEXPECTED, exactly those.
  QuantCheckInput in = base;
  // Weight 9 folds to ~3 steps: half a step from either tie.
  in.weights.data[9] = static_cast<float>(0x1p-6 * 3 / (base.bn.gamma[0] / std::sqrt(base.bn.var[0] + base.bn.eps)));
  in.found = quantized_fold(in, "exact").q;
  (*in.found)[5] += 2;
  (*in.found)[9] += 1;
  for (const std::size_t i : {100u, 2000u, 4000u}) (*in.found)[i] = std::clamp<std::int64_t>((*in.found)[i] + 3, -127, 127);
  const json bad = quant_check(in).to_json();
  CHECK(bad["verdict"] == "UNEXPECTED");
  std::vector<std::size_t> idx;
  for (const json& m : bad["mismatches"]) {
    CHECK(m["verdict"] == "UNEXPECTED");
    idx.push_back(m["flat_index"].get<std::size_t>());
  }
  CHECK(idx == std::vector<std::size_t>{5, 9, 100, 2000, 4000});
  // Usage errors.
  in.scales = std::vector<double>{0x1p-6};
  CHECK_THROWS_WITH(quant_check(in), Catch::Contains("1 scales given, 16 expected"));
}

TEST_CASE("npy: integer arrays round-trip (int8, int32)", "[quant][io]") {
  const auto dir = std::filesystem::temp_directory_path() / "foldcheck_quant_io";
  std::filesystem::create_directories(dir);
  const std::vector<std::int64_t> v{-127, -1, 0, 1, 127};
  write_npy_ints((dir / "a.npy").string(), {5}, v, 1);
  const IntArray a = read_npy_ints((dir / "a.npy").string());
  CHECK(a.shape == Shape{5});
  CHECK(a.values == v);
  const std::vector<std::int64_t> w{-100000, 7, 2147483647, -2147483647, 0, 3};
  write_npy_ints((dir / "b.npy").string(), {2, 3}, w, 4);
  const IntArray b = read_npy_ints((dir / "b.npy").string());
  CHECK(b.shape == (Shape{2, 3}));
  CHECK(b.values == w);
  CHECK_THROWS(read_npy_ints((dir / "missing.npy").string()));
}

TEST_CASE("quantized layer: power-of-two scales make fake-quant exact, free scales do not, and stay within the bound", "[quant]") {
  const CaseSpec spec = load_case(std::string(FOLDCHECK_SOURCE_DIR) + "/cases/graffitist_mbv2_project_1x1.json");
  REQUIRE(spec.quantize.has_value());
  CHECK(spec.quantize->pow2);
  const json p2 = quantized_layer(spec, *spec.quantize, Recipe::PyTorch, {}).to_json();
  CHECK(p2["verdict"] == "EXPECTED");
  CHECK(p2["integer"]["matches"] == p2["outputs"]);          // exact requantization by a power of two
  CHECK(p2["fake_quant_error_lsb"]["max_abs"] == 0.0);       // small integers times 2^k sum exactly in float32
  QuantSpec free = *spec.quantize;
  free.pow2 = false;
  free.per_channel = true;
  const json fr = quantized_layer(spec, free, Recipe::Tvm, {}).to_json();
  CHECK(fr["verdict"] == "EXPECTED");
  CHECK(fr["fake_quant_error_lsb"]["max_abs"].get<double>() > 0);
  CHECK(fr["fake_quant"]["unexpected"] == 0);
  CHECK(fr["integer"]["unexpected"] == 0);
}
