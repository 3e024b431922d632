// The calibrated band of a model's outputs (model/output_band.hpp) on a model built here of
// every op family the reverse pass takes (strided, padded, grouped and depthwise convs, pairs
// and an unpaired conv, Clip, Relu, Add, Mul by a constant, MaxPool, AveragePool,
// GlobalAveragePool, Concat, Flatten, Gemm):
// - the reverse pass is the transposed derivative: <v, J^T r> equals <J v, r> with J v by
//   central differences of float64 runs whose layer has that channel's weights scaled (every
//   channel of every layer, and each BatchNorm's eps);
// - an honest float32 output passes the band; one channel's weights scaled by 1e-4 is named
//   (its layer and channel first) with its size, and the band's false-alarm rate is stated.
#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <filesystem>
#include <random>

#include "band_model.hpp"
#include "foldcheck/model/model_run.hpp"
#include "foldcheck/model/output_band.hpp"
#include "onnx_builder.hpp"

using namespace foldcheck;
using foldcheck::testing::OnnxBuilder;

using namespace foldcheck_band_test;

namespace {

// The weight initializer of the layer a direction names (its node's second input).
std::string weight_of(const Model& m, const std::string& layer) {
  for (const ModelNode& n : m.nodes)
    if (n.name == layer) return n.inputs.at(1);
  FAIL("no layer " << layer);
  return "";
}

// J v by central differences: the layer's channel's weights (or its BatchNorm's eps) scaled by
// 1 +- h in float64 runs; v is that channel's output without its bias (eps: eps dy/deps).
std::vector<double> jv(const Fixture& f, const DirectionProjection& d, double h) {
  std::vector<double> ys[2];
  for (int s = 0; s < 2; ++s) {
    Model mm = f.m;
    const double k = s ? 1 - h : 1 + h;
    if (d.channel >= 0) {
      Tensor& w = mm.own_initializer(weight_of(mm, d.layer));
      const std::size_t per = w.data.size() / static_cast<std::size_t>(w.shape[0]);
      for (std::size_t i = 0; i < per; ++i) w.data[static_cast<std::size_t>(d.channel) * per + i] *= k;
    } else {
      for (const BnPair& p : f.pairs.pairs)
        if (p.name == d.layer) mm.nodes[p.bn].attributes["epsilon"].f = 1e-5 * k;
    }
    ys[s] = f.run(mm, DType::Float64).data;
  }
  std::vector<double> r(ys[0].size());
  for (std::size_t i = 0; i < r.size(); ++i) r[i] = (ys[0][i] - ys[1][i]) / (2 * h);
  return r;
}

}  // namespace

TEST_CASE("output band: the reverse pass is the transposed derivative of every direction", "[output_band]") {
  const Fixture f;
  std::mt19937_64 rng(5);
  const std::vector<double> r = random_values(48, 1.0, rng);
  const std::vector<DirectionProjection> proj = project_cotangent(f.m, f.pairs, f.x, r, 1);
  // 3 pairs (8 + 8 + 16 channels, 3 eps) and the unpaired depthwise conv (8 channels).
  REQUIRE(proj.size() == 43);
  for (const DirectionProjection& d : proj) {
    const std::vector<double> j = jv(f, d, 1e-4);
    double dot = 0, scale = 0;
    for (std::size_t i = 0; i < r.size(); ++i) {
      dot += j[i] * r[i];
      scale += std::fabs(j[i] * r[i]);
    }
    INFO(d.layer << " channel " << d.channel);
    // Central differences err by O(h^2) (ReLU and Clip kinks aside: none lies within 1e-4 of a
    // kink here); the pass's convs run in float32: 1e-5 of the terms' magnitude covers both.
    CHECK(d.value == Approx(dot).margin(1e-5 * scale + 1e-12));
  }
}

TEST_CASE("output band: an honest output passes, one channel scaled by 1e-4 is named", "[output_band]") {
  const Fixture f;
  const Tensor ref = f.run(f.m, DType::Float64);
  OutputBandOptions o;
  o.threads = 1;
  const OutputBand honest = output_band(f.m, f.pairs, f.x, ref, f.run(f.m, DType::Float32).data, o);
  REQUIRE_FALSE(honest.not_computed);
  CHECK(honest.directions == 43);
  CHECK(honest.alpha_direction == Approx(1e-3 / 43));
  CHECK(honest.beyond_count == 0);
  Model bad = f.m;
  Tensor& w = bad.own_initializer("wb");
  for (std::size_t i = std::size_t{3} * 36; i < std::size_t{4} * 36; ++i)
    w.data[i] = static_cast<float>(w.data[i] * (1 + 1e-4));
  const OutputBand b = output_band(f.m, f.pairs, f.x, ref, f.run(bad, DType::Float32).data, o);
  REQUIRE(b.worst);
  CHECK(b.beyond_count >= 1);
  CHECK(b.worst->layer == "b");
  CHECK(b.worst->channel == 3);
  // Its size: the named directions' |J v|^2 by a float64 run with the change (1e-4, within
  // the honest noise's few percent).
  CHECK(b.worst->rho == Approx(1e-4).epsilon(0.05));
  // output_band's one reverse pass (the observed output in slice 0 of the calibration's) gives
  // the figures of a calibration and a pass of its own, on any thread count.
  o.threads = 2;
  const OutputBand two =
      judge_band(calibrate_band(f.m, f.pairs, f.x, ref, o), f.m, f.pairs, f.x, ref, f.run(bad, DType::Float32).data, o);
  REQUIRE(two.worst);
  CHECK(two.beyond_count == b.beyond_count);
  CHECK(two.worst->channel == b.worst->channel);
  CHECK(two.worst->n == b.worst->n);
  CHECK(two.worst->band == b.worst->band);
  CHECK(two.floor_median == b.floor_median);
  CHECK(two.dof_min == b.dof_min);
}

TEST_CASE("output band: honest outputs it was not calibrated on stay within every band", "[output_band]") {
  // 24 honest float32 runs of orders and recipes the calibration did not draw (other
  // permutation seeds; fused by each recipe or not, both BatchNorm forms, bias first or last,
  // 1/sqrt or a fast rsqrt),
  // each judged on 43 directions: at alpha = 1e-3 over all, a crossing would be a false alarm
  // the stated rate gives with probability ~2.4%.
  const Fixture f;
  const Tensor ref = f.run(f.m, DType::Float64);
  OutputBandOptions o;
  o.threads = 1;
  const BandCalibration cal = calibrate_band(f.m, f.pairs, f.x, ref, o);
  double worst = 0;
  for (std::uint64_t k = 0; k < 24; ++k) {
    ModelRunOptions ro;
    ro.fused = k % 2;
    ro.recipe = std::array{Recipe::PyTorch, Recipe::OnnxRuntime, Recipe::Tvm, Recipe::OnnxOptimizer}[k / 2 % 4];
    ro.policy.bn_form = k % 3 ? BnForm::Textbook : BnForm::ScaleShift;
    ro.policy.order.bias_first = k % 5 == 0;
    ro.policy.permute = (0xfeedULL + k * 0x9e3779b97f4a7c15ULL) | 1;
    if (k / 3 % 2 == 1) ro.policy.arith.newton_steps = 1;  // TensorFlow's rsqrt (a 12-bit estimate, one step)
    const Tensor y = run_model(f.m, f.pairs, {{"X", f.x}}, ro).at("Y");
    const OutputBand b = judge_band(cal, f.m, f.pairs, f.x, ref, y.data, o);
    REQUIRE(b.worst);
    INFO("run " << k << ": " << b.worst->layer << " " << b.worst->channel << " at " << b.worst->ratio);
    CHECK(b.beyond_count == 0);
    worst = std::max(worst, b.worst->ratio);
  }
  // Not so wide that it says nothing: the honest runs reach a visible part of it.
  CHECK(worst > 0.1);
}

namespace {

// Items [first, first + rows) of a batch, along the first dimension.
Tensor rows(const Tensor& t, std::int64_t first, std::int64_t n) {
  Tensor r = t;
  r.shape[0] = n;
  const std::size_t per = t.data.size() / static_cast<std::size_t>(t.shape[0]);
  r.data.assign(t.data.begin() + static_cast<std::ptrdiff_t>(per * static_cast<std::size_t>(first)),
                t.data.begin() + static_cast<std::ptrdiff_t>(per * static_cast<std::size_t>(first + n)));
  return r;
}

}  // namespace

TEST_CASE("output band: a batch of inputs sums each direction's evidence, a model that fixes its batch is refused",
          "[output_band]") {
  Fixture f;
  std::mt19937_64 rng(9);
  const Tensor batch{{4, 4, 10, 10}, random_values(1600, 1.0, rng), DType::Float32};
  const auto run = [&](const Model& mm, const Tensor& x, DType dt) {
    ModelRunOptions o;
    o.dtype = dt;
    return run_model(mm, find_bn_pairs(mm), {{"X", x}}, o).at("Y");
  };
  // The batch-1 graph runs the 4 items at once as it runs each (its output grew alike).
  const Tensor ref = run(f.m, batch, DType::Float64);
  REQUIRE(ref.shape == Shape{4, 48});
  CHECK(batch_output_mismatch(f.m, batch, ref).empty());
  for (std::int64_t i = 0; i < 4; ++i) CHECK(run(f.m, rows(batch, i, 1), DType::Float64).data == rows(ref, i, 1).data);
  OutputBandOptions o;
  o.threads = 1;
  // The floor falls as the items add up: the signal along a direction adds over them, honest
  // rounding noise as the square root, a systematic honest drift as they do (4 items here: 0.68
  // of the items' own floors, 0.5 without the drift).
  Model bad = f.m;
  Tensor& w = bad.own_initializer("wb");
  for (std::size_t i = std::size_t{3} * 36; i < std::size_t{4} * 36; ++i)
    w.data[i] = static_cast<float>(w.data[i] * (1 + 2.5e-5));
  double single = 0;
  for (std::int64_t i = 0; i < 4; ++i)
    single += output_band(f.m, f.pairs, rows(batch, i, 1), rows(ref, i, 1),
                          run(f.m, rows(batch, i, 1), DType::Float32).data, o)
                  .floor_median /
              4;
  const OutputBand honest = output_band(f.m, f.pairs, batch, ref, run(f.m, batch, DType::Float32).data, o);
  REQUIRE_FALSE(honest.not_computed);
  CHECK(honest.beyond_count == 0);
  CHECK(honest.floor_median < 0.85 * single);
  const OutputBand b = output_band(f.m, f.pairs, batch, ref, run(bad, batch, DType::Float32).data, o);
  REQUIRE(b.worst);
  CHECK(b.beyond_count >= 1);
  CHECK(b.worst->layer == "b");
  CHECK(b.worst->channel == 3);
  CHECK(b.worst->rho == Approx(2.5e-5).epsilon(0.1));

  // A graph whose Reshape fixes the batch at 1 mixes the items: the output did not grow alike.
  OnnxBuilder g;
  g.input("X", {1, 4, 10, 10});
  g.output("Y", {1, 400});
  g.init_int64("shape", {1, -1});
  g.node("Reshape", "flat", {"X", "shape"}, {"Y"});
  const auto path = f.dir / "fixed_batch.onnx";
  g.save(path.string());
  const Model fixed = Model::load(path.string());
  const Tensor y = run(fixed, batch, DType::Float64);
  CHECK_THAT(batch_output_mismatch(fixed, batch, y), Catch::Contains("mixes or fixes its batch"));
}

namespace {

// A float32 run (inputs summed in an order of its own) whose every BatchNorm output y moves by
// delta_c (y - beta_c), i.e. its scale times (1 + delta_c): delta_c = common, plus, with
// `estimate`, what a Newton step leaves of a hardware rsqrt estimate's error e0 drawn uniformly
// within Intel's bound 1.5 * 2^-12: -1.5 e0^2 - 0.5 e0^3 (0 to -0.2 ppm, mean -0.07 ppm: a
// harsher estimate than this project's AMD host's or foldcheck's 12-bit model).
Tensor drifted(const Fixture& f, double common, bool estimate, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1.5 * 0x1p-12, 1.5 * 0x1p-12);
  ModelRunOptions o;
  o.dtype = DType::Float32;
  o.policy.permute = 2 * seed + 1;
  o.after_node = [&](std::size_t i, const std::vector<const Tensor*>&, Tensor& y) {
    const ModelNode& n = f.m.nodes[i];
    if (n.op != "BatchNormalization") return;
    const Tensor& beta = *f.m.initializer(n.inputs[2]);
    const std::size_t C = static_cast<std::size_t>(y.shape[1]), inner = y.data.size() / C;
    for (std::size_t c = 0; c < C; ++c) {
      const double e0 = estimate ? u(rng) : 0.0, d = common - 1.5 * e0 * e0 - 0.5 * e0 * e0 * e0;
      for (std::size_t k = c * inner; k < (c + 1) * inner; ++k)
        y.data[k] = static_cast<float>(y.data[k] + d * (y.data[k] - beta.data[c]));
    }
  };
  return run_model(f.m, f.pairs, {{"X", f.x}}, o).at("Y");
}

}  // namespace

TEST_CASE(
    "output band: a common drift of the BatchNorm scales a Newton-refined rsqrt estimate gives is taken out, "
    "a larger or upward one is not",
    "[output_band]") {
  // TensorFlow's BatchNorm (and TFLite's fold) takes 1/sqrt(var + eps) as Eigen's rsqrt: every
  // scale shrinks by 1.5 e0^2, up to 0.2 ppm. On this model a common drift of 0.1 ppm of every
  // scale crosses the eps directions' bands (measured: 1.2-1.8x), so the band takes out the
  // output's least-squares multiple of that drift within [-0.2 ppm, 0] (output_band.cpp).
  const Fixture f;
  const Tensor ref = f.run(f.m, DType::Float64);
  OutputBandOptions o;
  o.threads = 1;
  const BandCalibration cal = calibrate_band(f.m, f.pairs, f.x, ref, o);
  const auto judged = [&](double common, bool estimate, std::uint64_t seed) {
    return judge_band(cal, f.m, f.pairs, f.x, ref, drifted(f, common, estimate, seed).data, o);
  };
  for (std::uint64_t s = 1; s <= 4; ++s) {
    INFO("seed " << s);
    // Each channel's own e0 within Intel's bound: within every band, its common part taken out.
    const OutputBand est = judged(0, true, s);
    CHECK(est.beyond_count == 0);
    INFO("fitted " << est.scale_drift);
    // A shrink is fitted, inside the clamp (the channels' mean is 0.067 ppm; the fit weighs them by
    // their outputs' size, measured 0.027-0.104 ppm over these seeds).
    CHECK(est.scale_drift < -0.01e-6);
    CHECK(est.scale_drift > -0.19e-6);
    // The arithmetic's whole range in common: taken out.
    const OutputBand edge = judged(-0.2e-6, false, s);
    CHECK(edge.beyond_count == 0);
    CHECK(edge.scale_drift == Approx(-0.2e-6).epsilon(0.05));
    // Beyond it, or upward (no Newton step grows the scale): seen, taken out at most to the edge.
    const OutputBand down = judged(-1e-6, false, s);
    CHECK(down.beyond_count >= 1);
    CHECK(down.scale_drift == Approx(-0.2012e-6).epsilon(1e-3));
    const OutputBand up = judged(0.3e-6, false, s);
    CHECK(up.beyond_count >= 1);
    CHECK(up.scale_drift == 0);
  }
  // One reverse pass (output_band) or a calibration and a pass of its own (judge_band): the
  // same fit and the same figures.
  const Tensor y = drifted(f, -0.2e-6, true, 9);
  const OutputBand one = output_band(f.m, f.pairs, f.x, ref, y.data, o);
  const OutputBand two = judge_band(cal, f.m, f.pairs, f.x, ref, y.data, o);
  CHECK(one.scale_drift == two.scale_drift);
  REQUIRE(one.worst);
  REQUIRE(two.worst);
  CHECK(one.worst->n == two.worst->n);
  CHECK(one.beyond_count == two.beyond_count);
  // A non-finite output has no drift to fit (either sign: one of them would clamp to the edge).
  for (const double v : {HUGE_VAL, -HUGE_VAL}) {
    std::vector<double> inf = y.data;
    inf[0] = v;
    const OutputBand bi = judge_band(cal, f.m, f.pairs, f.x, ref, inf, o);
    CHECK_FALSE(bi.not_computed);
    CHECK(bi.scale_drift == 0);
  }
}
