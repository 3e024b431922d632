// foldcheck_bench: time per multiply-add of foldcheck's float paths and of the certified
// reference on conv shapes from real networks. Items are multiply-adds, so Google
// Benchmark's items_per_second compares paths directly; attribution counts the
// multiply-adds of its replays. (The fast-reference issue adds
// oneDNN and naive multiprecision entries and the 56x56 shapes.)
#include <benchmark/benchmark.h>

#include <random>

#include "foldcheck/attribution.hpp"
#include "foldcheck/evaluate.hpp"
#include "foldcheck/fold_pass.hpp"

using namespace foldcheck;

namespace {

struct Shape {
  std::int64_t C, O, HW, K, groups;
};

struct Fixture {
  Graph g;
  std::vector<double> x;
  std::int64_t macs = 0;
};

Fixture make(const Shape& s, DType dt) {
  std::mt19937_64 rng(42);
  std::normal_distribution<double> nd;
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
  bn.bn = ref::BnParams{std::vector<double>(geo.O, 1.0), std::vector<double>(geo.O, 0.0), std::vector<double>(geo.O, 0.0),
                        std::vector<double>(geo.O, 1.0), 1e-5};
  f.g.dtype = dt;
  f.g.nodes = {conv, bn};
  f.macs = geo.output_size() * geo.terms_per_output();
  return f;
}

const Shape kShapes[] = {{64, 64, 28, 3, 1}, {256, 64, 28, 1, 1}, {64, 64, 56, 3, 64}};
const char* kNames[] = {"conv3x3_64_28", "conv1x1_256_28", "depthwise3x3_64_56"};

void float_path(benchmark::State& st, int shape, DType dt, Accumulation acc) {
  const Fixture f = make(kShapes[shape], dt);
  const Graph fused = fold_batchnorm(f.g, Recipe::PyTorch, {});
  for (auto _ : st) benchmark::DoNotOptimize(evaluate(fused, f.x, Policy{acc, BnForm::Textbook, 0, {}}));
  st.SetItemsProcessed(st.iterations() * f.macs);
}

// Attribution of 256 outputs of the fused PyTorch path: items are the multiply-adds of
// the replays (record + 2 checks + one per stage = 10 runs of each output's dot product).
void attribution_path(benchmark::State& st, int shape) {
  const Fixture f = make(kShapes[shape], DType::Float32);
  const Node& c = f.g.nodes[0];
  const ref::LayerResult ex =
      ref::conv_bn(ref::LayerData{c.geometry, &f.x, &c.weight.data, nullptr, &f.g.nodes[1].bn}, {});
  const Policy p;
  const std::vector<double> y = evaluate(fold_batchnorm(f.g, Recipe::PyTorch, {}), f.x, p);
  const auto sample = attribution_sample(y.size(), 256, {});
  for (auto _ : st)
    benchmark::DoNotOptimize(attribute(f.g, f.x, ex, PathSpec{Recipe::PyTorch, p}, y, sample, {}, 0));
  st.SetItemsProcessed(st.iterations() * static_cast<std::int64_t>(sample.size()) * c.geometry.terms_per_output() * 10);
}

void reference_path(benchmark::State& st, int shape) {
  const Fixture f = make(kShapes[shape], DType::Float32);
  const Node& c = f.g.nodes[0];
  for (auto _ : st)
    benchmark::DoNotOptimize(ref::conv_bn(ref::LayerData{c.geometry, &f.x, &c.weight.data, nullptr, &f.g.nodes[1].bn}, {}));
  st.SetItemsProcessed(st.iterations() * f.macs);
}

}  // namespace

int main(int argc, char** argv) {
  for (int s = 0; s < 3; ++s) {
    const std::string n = kNames[s];
    benchmark::RegisterBenchmark((n + "/float32").c_str(), float_path, s, DType::Float32, Accumulation::Sequential)
        ->Unit(benchmark::kMillisecond)->UseRealTime();
    benchmark::RegisterBenchmark((n + "/float32_pairwise").c_str(), float_path, s, DType::Float32, Accumulation::Pairwise)
        ->Unit(benchmark::kMillisecond)->UseRealTime();
    benchmark::RegisterBenchmark((n + "/float64").c_str(), float_path, s, DType::Float64, Accumulation::Sequential)
        ->Unit(benchmark::kMillisecond)->UseRealTime();
    benchmark::RegisterBenchmark((n + "/attribution").c_str(), attribution_path, s)
        ->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);
    benchmark::RegisterBenchmark((n + "/reference").c_str(), reference_path, s)
        ->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1);
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
