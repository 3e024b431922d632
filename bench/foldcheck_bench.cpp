// foldcheck_bench: time per multiply-add of foldcheck's paths and of the certified
// reference, against oneDNN (the machine's practical limit) and a naive multiprecision
// reference, on conv shapes from real networks. Items are multiply-adds (for naive_mp,
// those of the channels it computes), so items_per_second compares entries directly.
// Every entry uses both cores (all hardware threads).
//   <shape>/onednn       oneDNN f32 convolution (forward inference), same tensors
//   <shape>/float32      foldcheck's float32 path, sequential order, fused PyTorch fold
//   <shape>/float64      the same in float64
//   <shape>/reference    the certified reference for float32 data (fast path + fallbacks):
//                        each output's correctly rounded float32 value, approx and radius
//   <shape>/reference_bounds  the same plus the bound data (conv value, sum|x w|, sum|x|)
//                        that `foldcheck run` asks for
//   <shape>/reference_mpfr  the all-multiprecision reference (mpfr_sum per output)
//   <shape>/naive_mp     every term and the BatchNorm in Boost cpp_bin_float_50
//   <shape>/attribution  stage attribution replays (10 per output) of 256 outputs
//   resnet50/forward_float32  one float32 forward pass of a ResNet-50-shaped model at 224x224
//                        (random weights and BN statistics; BatchNorms unfused), in foldcheck
//   resnet50/accuracy_diff    the full accuracy-diff on that model: every pair's fold per recipe,
//                        float32 unfused and fused and float64 runs, every conv pair on its
//                        activations with the certified reference, bounds and attribution
//   (items for the resnet50 entries: the model's multiply-adds, 4.1 G)
//   resnet18/output_bound/K  the end-to-end bound of accuracy-diff --observed-output alone on a
//                        ResNet-18-shaped model, K perturbed float64 runs (items: (K + 1) x
//                        1.82 G); counters: median_bound_ulp (its width), sqrt_c
//   resnet18/accuracy_diff_observed_output  the whole accuracy-diff --observed-output there
// The run's context holds "isa": the x86-64 level of the reference's kernels (the best this
// CPU has, or FOLDCHECK_ISA's; conv_bn_reference.hpp isa_level). --list-isa-levels prints
// the levels this CPU can run, best first, one per line (tools/bench_levels.sh runs each).
#include <benchmark/benchmark.h>
#include <malloc.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <thread>

#include "foldcheck/commands/accuracy_diff.hpp"
#include "foldcheck/layer/attribution.hpp"
#include "foldcheck/io/npy.hpp"
#include "foldcheck/model/model_run.hpp"
#include "foldcheck/model/output_bound.hpp"
#include "foldcheck/numerics/dtype.hpp"
#include "foldcheck/reference/conv_bn_reference.hpp"
#include "resnet_model.hpp"
#include "foldcheck/layer/evaluate.hpp"
#include "foldcheck/layer/fold_pass.hpp"
#include "naive_mp.hpp"
#include "onednn_conv.hpp"

using namespace foldcheck;

namespace {

struct Shape {
  const char* name;
  std::int64_t C, O, HW, K, groups;
};

const Shape kShapes[] = {{"conv3x3_64", 64, 64, 56, 3, 1},
                         {"conv1x1_256", 256, 64, 56, 1, 1},
                         {"depthwise3x3_64", 64, 64, 56, 3, 64}};

struct Fixture {
  Graph g;
  std::vector<double> x;
  std::int64_t macs = 0;
};

Fixture make(const Shape& s, DType dt) {
  std::mt19937_64 rng(42);
  std::normal_distribution<double> nd;
  std::uniform_real_distribution<double> ud(0.5, 1.5);
  Fixture f;
  ref::ConvGeometry geo;
  geo.C = s.C; geo.O = s.O; geo.H = geo.W = s.HW; geo.KH = geo.KW = s.K; geo.groups = s.groups;
  geo.pad_top = geo.pad_left = geo.pad_bottom = geo.pad_right = s.K / 2;
  for (std::int64_t i = 0; i < geo.C * geo.H * geo.W; ++i) f.x.push_back(round_to(dt, nd(rng)));
  Node conv;
  conv.kind = Node::Kind::Conv;
  conv.geometry = geo;
  for (std::int64_t i = 0; i < geo.O * geo.terms_per_output(); ++i) conv.weight.data.push_back(round_to(dt, 0.05 * nd(rng)));
  Node bn;
  bn.kind = Node::Kind::BatchNorm;
  bn.geometry = geo;
  for (std::int64_t o = 0; o < geo.O; ++o) {
    bn.bn.gamma.push_back(round_to(dt, ud(rng)));
    bn.bn.beta.push_back(round_to(dt, 0.1 * nd(rng)));
    bn.bn.mean.push_back(round_to(dt, 0.1 * nd(rng)));
    bn.bn.var.push_back(round_to(dt, ud(rng)));
  }
  bn.bn.eps = 1e-5;
  f.g.dtype = dt;
  f.g.nodes = {conv, bn};
  f.macs = geo.output_size() * geo.terms_per_output();
  return f;
}

unsigned cores() { return std::max(1u, std::thread::hardware_concurrency()); }

void onednn(benchmark::State& st, int s) {
  const Fixture f = make(kShapes[s], DType::Float32);
  bench::OneDnnConv conv(f.g.nodes[0].geometry, f.x, f.g.nodes[0].weight.data);
  for (auto _ : st) conv.run();
  st.SetItemsProcessed(st.iterations() * f.macs);
}

void float_path(benchmark::State& st, int s, DType dt) {
  const Fixture f = make(kShapes[s], dt);
  const Graph fused = fold_batchnorm(f.g, Recipe::PyTorch, {});
  for (auto _ : st) benchmark::DoNotOptimize(evaluate(fused, f.x, Policy{Accumulation::Sequential, BnForm::Textbook, 0, {}}));
  st.SetItemsProcessed(st.iterations() * f.macs);
}

void reference_path(benchmark::State& st, int s, bool fast, bool bound_data) {
  const Fixture f = make(kShapes[s], DType::Float32);
  const Node& c = f.g.nodes[0];
  ref::Options o;
  o.formats = ref::format_bit(ref::kFloat32);
  o.fast = fast;
  o.bound_data = bound_data;
  std::int64_t fallbacks = 0, compensated = 0, outputs = 0;
  for (auto _ : st) {
    const ref::LayerResult r = ref::conv_bn(ref::LayerData{c.geometry, &f.x, &c.weight.data, nullptr, &f.g.nodes[1].bn}, o);
    fallbacks += r.fallbacks;
    compensated += r.compensated;
    outputs += static_cast<std::int64_t>(r.y.size());
    benchmark::DoNotOptimize(r.y.radius(0));
  }
  st.SetItemsProcessed(st.iterations() * f.macs);
  st.counters["fallback_fraction"] = outputs ? static_cast<double>(fallbacks) / static_cast<double>(outputs) : 0.0;
  st.counters["compensated_fraction"] = outputs ? static_cast<double>(compensated) / static_cast<double>(outputs) : 0.0;
}

void naive_mp(benchmark::State& st, int s) {
  const Fixture f = make(kShapes[s], DType::Float32);
  const Node& c = f.g.nodes[0];
  // A few channels (the full layer would take minutes), but at least ~2 M terms so that
  // one iteration is long enough to time.
  const std::int64_t per_channel = c.geometry.output_size() / c.geometry.O * c.geometry.terms_per_output();
  const std::int64_t channels =
      std::min<std::int64_t>(c.geometry.O, std::max<std::int64_t>(2 * cores(), 2'000'000 / per_channel + 1));
  for (auto _ : st)
    benchmark::DoNotOptimize(
        bench::naive_mp_conv_bn(c.geometry, f.x, c.weight.data, f.g.nodes[1].bn, 0, channels, cores()));
  st.SetItemsProcessed(st.iterations() * f.macs / c.geometry.O * channels);
}

void attribution_path(benchmark::State& st, int s) {
  const Fixture f = make(kShapes[s], DType::Float32);
  const Node& c = f.g.nodes[0];
  ref::Options o;
  o.formats = ref::format_bit(ref::kFloat32);
  const ref::LayerResult ex = ref::conv_bn(ref::LayerData{c.geometry, &f.x, &c.weight.data, nullptr, &f.g.nodes[1].bn}, o);
  const Policy p;
  const std::vector<double> y = evaluate(fold_batchnorm(f.g, Recipe::PyTorch, {}), f.x, p);
  const auto sample = attribution_sample(y.size(), 256, {});
  for (auto _ : st)
    benchmark::DoNotOptimize(attribute(f.g, f.x, ex, PathSpec{Recipe::PyTorch, p}, y, sample, {}, 0));
  st.SetItemsProcessed(st.iterations() * static_cast<std::int64_t>(sample.size()) * c.geometry.terms_per_output() * 10);
}

Tensor resnet_input(const Model& m) {
  std::mt19937_64 rng(0);
  std::normal_distribution<double> nd;
  Tensor x{m.inputs[0].shape, std::vector<double>(static_cast<std::size_t>(element_count(m.inputs[0].shape))), DType::Float32};
  for (double& v : x.data) v = static_cast<float>(nd(rng));
  return x;
}

// ResNet-50 at 224x224: 4.09 G multiply-adds (convs and the classifier).
constexpr std::int64_t kResNet50Macs = 4'089'184'256;

void resnet50_forward(benchmark::State& st) {
  const Model m = bench::resnet50_model();
  const BnPatterns p = find_bn_pairs(m);
  const Tensor x = resnet_input(m);
  ModelRunOptions o;
  for (auto _ : st) benchmark::DoNotOptimize(run_model(m, p, {{"input", x}}, o));
  st.SetItemsProcessed(st.iterations() * kResNet50Macs);
}

void resnet50_accuracy_diff(benchmark::State& st) {
  const Model m = bench::resnet50_model();
  AccuracyDiffOptions o;
  for (auto _ : st) benchmark::DoNotOptimize(accuracy_diff(m, o));
  st.SetItemsProcessed(st.iterations() * kResNet50Macs);
}

// ResNet-18-shaped model at 224x224: 1.82 G multiply-adds (convs and the classifier).
constexpr std::int64_t kResNet18Macs = 1'814'073'344;

// The end-to-end bound of `accuracy-diff --observed-output` alone, with K = range(0)
// perturbed float64 runs: its time, and its width as the median over the outputs of the
// bound in float32 ULP of the reference output (the width's dependence on K: the factor
// sqrt(c) of output_bound.hpp falls as K grows, the estimate's noise with it).
void resnet18_output_bound(benchmark::State& st) {
  const Model m = bench::resnet18_model();
  const BnPatterns p = find_bn_pairs(m);
  const Tensor x = resnet_input(m);
  OutputBoundOptions o;
  o.samples = static_cast<std::size_t>(st.range(0));
  OutputBound r;
  for (auto _ : st) r = output_bound(m, p, {{"input", x}}, o);
  std::vector<double> width;
  const std::vector<double>& y = r.reference.at("logits").data;
  const std::vector<double>& bd = r.bound.at("logits");
  for (std::size_t j = 0; j < y.size(); ++j) width.push_back(bd[j] / ulp(DType::Float32, y[j]));
  std::nth_element(width.begin(), width.begin() + static_cast<std::ptrdiff_t>(width.size() / 2), width.end());
  st.counters["median_bound_ulp"] = width[width.size() / 2];
  st.counters["sqrt_c"] = r.inflation;
  st.SetItemsProcessed(st.iterations() * kResNet18Macs * (static_cast<std::int64_t>(o.samples) + 1));
}

// The whole `accuracy-diff --input X --observed-output Y` on the ResNet-18-shaped model, Y
// being foldcheck's own folded float32 output (an engine that folds correctly).
void resnet18_accuracy_diff_observed_output(benchmark::State& st) {
  const Model m = bench::resnet18_model();
  const BnPatterns p = find_bn_pairs(m);
  const Tensor x = resnet_input(m);
  ModelRunOptions ro;
  ro.fused = true;
  const std::string dir = std::filesystem::temp_directory_path() / ("foldcheck_bench_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  write_npy(dir + "/x.npy", x);
  write_npy(dir + "/y.npy", run_model(m, p, {{"input", x}}, ro).at("logits"));
  AccuracyDiffOptions o;
  o.input = dir + "/x.npy";
  o.observed_output = dir + "/y.npy";
  for (auto _ : st) benchmark::DoNotOptimize(accuracy_diff(m, o));
  std::filesystem::remove_all(dir);
  st.SetItemsProcessed(st.iterations() * kResNet18Macs);
}

}  // namespace

int main(int argc, char** argv) {
  // Keep freed memory for reuse instead of returning it to the OS: a layer's reference and
  // paths allocate tens of MB, and faulting fresh pages back in on every use was measured
  // at ~40 ns per output (more than certifying it). glibc: serve large blocks from the
  // heap (no mmap) and never trim it.
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  if (argc == 2 && std::string(argv[1]) == "--list-isa-levels") {
    for (const char* level : ref::available_isa_levels()) std::printf("%s\n", level);
    return 0;
  }
  try {
    benchmark::AddCustomContext("isa", ref::isa_level());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "foldcheck_bench: %s\n", e.what());
    return 2;
  }
  for (int s = 0; s < 3; ++s) {
    const std::string n = kShapes[s].name;
    auto reg = [&](const std::string& e, auto&& f, auto... args) {
      return benchmark::RegisterBenchmark((n + "/" + e).c_str(), f, args...)->Unit(benchmark::kMillisecond)->UseRealTime();
    };
    reg("onednn", onednn, s)->MinTime(0.5);
    reg("float32", float_path, s, DType::Float32);
    reg("float64", float_path, s, DType::Float64);
    reg("reference", reference_path, s, true, false)->MinTime(0.5);
    reg("reference_bounds", reference_path, s, true, true)->MinTime(0.5);
    reg("reference_mpfr", reference_path, s, false, false)->Iterations(1);
    reg("naive_mp", naive_mp, s)->Iterations(1);
    reg("attribution", attribution_path, s)->Iterations(3);
  }
  benchmark::RegisterBenchmark("resnet50/forward_float32", resnet50_forward)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(2);
  benchmark::RegisterBenchmark("resnet50/accuracy_diff", resnet50_accuracy_diff)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1);
  benchmark::RegisterBenchmark("resnet18/output_bound", resnet18_output_bound)
      ->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1)->Arg(8)->Arg(16)->Arg(32)->Arg(64);
  benchmark::RegisterBenchmark("resnet18/accuracy_diff_observed_output", resnet18_accuracy_diff_observed_output)
      ->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
