#pragma once
// The sequential-order conv, one output row at a time, vectorised across the row's
// pixels: bit-identical to conv_output() with Accumulation::Sequential and no FMA,
// because every pixel (lane) performs the same operations in the same order — each
// in-bounds product rounded, then added to its accumulator; padded positions are
// skipped. Internal.
//
// Built once per x86-64 level (conv_rows.cpp with -march=x86-64-v4, -v3 and the baseline,
// each into its own namespace, as the reference's kernels are); conv_rows_select.cpp runs the
// level the reference runs (ref::isa_level(): the best the CPU has, or FOLDCHECK_ISA's), so
// one variable sets every kernel's level. No level contracts a multiply and an add into an
// FMA (-ffp-contract=off everywhere): every level gives the same bits.
#include <cstdint>
#include <vector>

#include "foldcheck/reference/layer.hpp"

namespace foldcheck::detail {

// acc[0..OW) for output row (n, o, oh): x NCHW, wo channel o's weights, bias or nullptr.
void sequential_row_f32(const ref::ConvGeometry& g, const float* x, const float* wo, const float* bias, std::int64_t n,
                        std::int64_t o, std::int64_t oh, float* acc);
void sequential_row_f64(const ref::ConvGeometry& g, const double* x, const double* wo, const double* bias,
                        std::int64_t n, std::int64_t o, std::int64_t oh, double* acc);

// The channel-lane kernels: a whole conv with the vector lanes across output channels (a
// channel's weights transposed so that a block of channels shares each term's load, the
// input value broadcast) — or, for a depthwise conv (one input and one output channel per
// group), across channels of an NHWC input. Each lane is one output: it performs exactly
// the operations of the sequential order, in (c, kh, kw) order, each product rounded and
// then added (no FMA), and the bias added last, so its bits are conv_output()'s.
//
// One difference of form, proven harmless: the input is zero-padded (so that the window of
// every output lies in bounds), and a padded position adds the product 0 * w, which the
// sequential order skips. The accumulator starts at +0 and, in round-to-nearest, never
// becomes -0 (x + y = -0 only for x = y = -0; exact cancellation gives +0), so adding +0 or
// -0 leaves it unchanged, whatever it holds (a number, an infinity, NaN). The product
// 0 * w is a signed zero for every finite w, but NaN for an infinite or NaN w: the caller
// takes this path only when every weight is finite, and only in the default floating-point
// environment (round to nearest, no flush-to-zero), which the argument assumes
// (conv_lanes.cpp).
//
// Layout (the caller builds it, conv_lanes.cpp): xp [N][Cp][Hp][Wp] (depthwise: [N][Hp][Wp][Cp],
// a pixel's channels adjacent for the vector loads), zero outside the input
// (padded row r is input row r - pad_top, column q is q - pad_left); wt [blocks of every
// group][terms][block] (lane j of block b of group gi is output channel gi*opg + b*block + j,
// zero past the group's channels; depthwise: [blocks][KH*KW][block], lane j of block b is
// channel b*block + j); bias [blocks of every group][block] or nullptr; y NCHW, in double.
template <class A>
struct LaneJob {
  std::int64_t N = 1, C = 1, O = 1, OH = 1, OW = 1, KH = 1, KW = 1;
  std::int64_t sh = 1, sw = 1, dh = 1, dw = 1, groups = 1, cpg = 1, opg = 1;
  std::int64_t Hp = 1, Wp = 1, Cp = 1;  // the padded input's extents (Cp = C but for depthwise lanes)
  std::int64_t vectors = 1;             // registers per block: block = vectors * lanes
  std::int64_t block = 1, blocks = 1;   // channels per block; blocks per group (depthwise: in all)
  bool depthwise = false;
  bool bias_first = false;  // the accumulators start from the bias (order.hpp), not +0
  const A* xp = nullptr;
  const A* wt = nullptr;
  const A* bias = nullptr;
  double* y = nullptr;  // each accumulator as it is (a float widens exactly)
  // One item is one output row (n, oh) of one block: (n, group, block, oh), oh fastest.
  std::int64_t items() const { return N * (depthwise ? 1 : groups) * blocks * OH; }
};

// One level's kernels (the functions above, at that level).
struct RowKernels {
  void (*f32)(const ref::ConvGeometry&, const float*, const float*, const float*, std::int64_t, std::int64_t,
              std::int64_t, float*);
  void (*f64)(const ref::ConvGeometry&, const double*, const double*, const double*, std::int64_t, std::int64_t,
              std::int64_t, double*);
  int lanes_f32, lanes_f64;  // elements of A per vector register at this level
  void (*lane_item_f32)(const LaneJob<float>&, std::int64_t item);
  void (*lane_item_f64)(const LaneJob<double>&, std::int64_t item);
};
// The kernels of the level the reference runs (ref::isa_level(): throws std::invalid_argument
// for a FOLDCHECK_ISA the CPU lacks).
const RowKernels& row_kernels();

// The whole sequential-order conv (no FMA) by the channel-lane kernels, into y (NCHW,
// g.output_size()), when they apply: every weight finite, a layer whose channels fill at
// least half of a block (or a depthwise conv), and a padded input at most a few times the
// size of the input and output. Returns false, y untouched, otherwise (conv_lanes.cpp).
// x is the input as stored (each value converted to A here), y the accumulators in double.
template <class A>
bool conv_lanes(const ref::ConvGeometry& g, const std::vector<double>& x, const std::vector<A>& w,
                const std::vector<A>& bias, unsigned threads, std::vector<double>& y, bool bias_first = false);

namespace rows_v4 {
RowKernels kernels();
}
namespace rows_v3 {
RowKernels kernels();
}
namespace rows_base {
RowKernels kernels();
}

}  // namespace foldcheck::detail
