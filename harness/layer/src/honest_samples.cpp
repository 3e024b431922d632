// Honest computations of one layer (honest_samples.hpp).
#include "foldcheck/layer/honest_samples.hpp"

#include <iterator>

#include "foldcheck/layer/evaluate.hpp"

namespace foldcheck {
namespace {

std::uint64_t mix(std::uint64_t z) {  // splitmix64's finalizer
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace

HonestSamples honest_samples(const std::vector<Graph>& graphs, const std::vector<double>& x,
                             const HonestSampleSpec& spec) {
  HonestSamples hs;
  const Order in_order[] = {Order{}, Order{Accumulation::Blocked, 16}, Order{Accumulation::Pairwise}};
  constexpr std::size_t kInOrder = std::size(in_order);
  for (std::size_t m = 0; m < spec.samples; ++m) {
    const std::size_t gi = m % graphs.size();
    // Round r = m / G computes every graph once: odd rounds start from the bias (sequentially or
    // blocked), so each graph has such samples when K >= 2G; the BatchNorm's form alternates.
    const std::size_t round = m / graphs.size();
    Policy pol;
    if (m < kInOrder) {
      pol.order = in_order[m];
      pol.arith.fma = m > 0;
    } else if (round % 2 == 1) {
      pol.order = round % 4 == 1 ? Order{} : Order{Accumulation::Blocked, 16};
      pol.order.bias_first = true;
    }
    pol.bn_form = (round + gi) % 2 ? BnForm::ScaleShift : BnForm::Textbook;
    pol.threads = spec.threads;
    if (m >= kInOrder) pol.permute = mix(spec.seed ^ mix(spec.layer_index * 0x9e3779b97f4a7c15ULL + m));
    hs.y.push_back(evaluate(graphs[gi], x, pol));
    hs.graph.push_back(gi);
  }
  return hs;
}

}  // namespace foldcheck
