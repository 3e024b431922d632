#pragma once
// Honest computations of one layer: the calibration the per-channel statistic's estimated
// threshold (channel_bias.hpp) measures its band with. Used by the engines' layers and by
// diagnose.
//
// Contract: sample m is graph m mod G (a recipe's fold, or an unfused conv -> BatchNorm, or a
// plain conv) evaluated in float32 on x in one of the kernel orders real engines use. Real
// kernels sum the terms in the layer's own order, in blocks, with or without fma; on real data
// that order can drift far more than others (MobileNetV2 features.18.0, channel 781: -8.8 ppm
// sequential in order, -6.8 ONNX Runtime, 0.5 rms over random orders). So samples 0-2 keep the
// input channels in order (sequential; blocked by 16 with fma; pairwise with fma) and the
// others permute them within each group, seeded by (seed, layer, m), summed sequentially (the
// fast kernels), or, in odd rounds (round m / G computes every graph once), from the conv bias
// (order.hpp's bias_first: oneDNN's kernels and PyTorch's slow conv start the accumulator from
// it; with a bias large beside the outputs' spread that order drifts 1-300x more along a
// channel than the bias added last: PyTorch's oneDNN conv with a bias of +10 on 256 channels,
// and systematically: +2 ppm on a channel in every order, so the samples must hold that kind),
// sequentially in rounds 1, 5, ..., else blocked by 16; an unfused sample alternates the BatchNorm's
// textbook and scale-shift forms (both are engines' kernels). The same values for any thread count.
#include <cstdint>
#include <vector>

#include "foldcheck/layer/graph.hpp"

namespace foldcheck {

struct HonestSampleSpec {
  std::size_t samples = 16;
  std::uint64_t seed = 0, layer_index = 0;  // the permutations' seed and the layer's place
  unsigned threads = 0;                     // 0: hardware concurrency
};

struct HonestSamples {
  std::vector<std::vector<double>> y;  // per sample: its outputs, NCHW
  std::vector<std::size_t> graph;      // per sample: the index of the graph it computed
};

// graphs: non-empty, each with a Conv first node of the same geometry.
HonestSamples honest_samples(const std::vector<Graph>& graphs, const std::vector<double>& x,
                             const HonestSampleSpec& spec);

}  // namespace foldcheck
