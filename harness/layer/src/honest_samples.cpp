// Honest computations of one layer (honest_samples.hpp).
#include "foldcheck/layer/honest_samples.hpp"

#include <algorithm>
#include <iterator>
#include <numeric>
#include <random>

#include "foldcheck/layer/evaluate.hpp"

namespace foldcheck {
namespace {

std::uint64_t mix(std::uint64_t z) {  // splitmix64's finalizer
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// g with its conv's input channels taken in the order perm (within each group), and x to match.
void permute_inputs(Graph& g, std::vector<double>& x, const std::vector<std::int64_t>& perm) {
  const ref::ConvGeometry& geo = g.nodes[0].geometry;
  const std::int64_t cg = geo.C / geo.groups, hw = geo.H * geo.W, khw = geo.KH * geo.KW;
  const std::vector<double> w = g.nodes[0].weight.data, x0 = x;
  std::vector<double>& wp = g.nodes[0].weight.data;
  for (std::int64_t o = 0; o < geo.O; ++o)
    for (std::int64_t ci = 0; ci < cg; ++ci)
      std::copy_n(w.begin() + (o * cg + perm[ci]) * khw, khw, wp.begin() + (o * cg + ci) * khw);
  for (std::int64_t n = 0; n < geo.N; ++n)
    for (std::int64_t gr = 0; gr < geo.groups; ++gr)
      for (std::int64_t ci = 0; ci < cg; ++ci)
        std::copy_n(x0.begin() + ((n * geo.C) + gr * cg + perm[ci]) * hw, hw,
                    x.begin() + ((n * geo.C) + gr * cg + ci) * hw);
}

}  // namespace

HonestSamples honest_samples(const std::vector<Graph>& graphs, const std::vector<double>& x,
                             const HonestSampleSpec& spec) {
  HonestSamples hs;
  const ref::ConvGeometry& geo = graphs.front().nodes[0].geometry;
  const std::int64_t cg = geo.C / geo.groups;
  const Order in_order[] = {Order{}, Order{Accumulation::Blocked, 16}, Order{Accumulation::Pairwise}};
  constexpr std::size_t kInOrder = std::size(in_order);
  for (std::size_t m = 0; m < spec.samples; ++m) {
    std::mt19937_64 rng(mix(spec.seed ^ mix(spec.layer_index * 0x9e3779b97f4a7c15ULL + m)));
    std::vector<std::int64_t> perm(static_cast<std::size_t>(cg));
    std::iota(perm.begin(), perm.end(), 0);
    if (m >= kInOrder) std::shuffle(perm.begin(), perm.end(), rng);
    const std::size_t gi = m % graphs.size();
    Graph pg = graphs[gi];
    std::vector<double> xp = x;
    permute_inputs(pg, xp, perm);
    Policy pol;
    if (m < kInOrder) {
      pol.order = in_order[m];
      pol.arith.fma = m > 0;
    }
    pol.bn_form = (m / graphs.size()) % 2 ? BnForm::ScaleShift : BnForm::Textbook;
    pol.threads = spec.threads;
    hs.y.push_back(evaluate(pg, xp, pol));
    hs.graph.push_back(gi);
  }
  return hs;
}

}  // namespace foldcheck
