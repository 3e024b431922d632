#pragma once
// The fast path's vector kernels (internal to the reference), compiled once per x86-64
// level: CMake builds fast_kernels.cpp three times, with -march=x86-64-v4 (AVX-512),
// -march=x86-64-v3 (AVX2 + FMA) and the baseline, each into its own namespace with its own
// register blocking, and fast_conv.cpp picks one at run time (kernels(): the best the CPU
// has, or the level FOLDCHECK_ISA names).
//
// Why whole translation units and not target_clones: GCC lowers generic vector
// comparisons and conversions for the baseline target before it clones a function, so a
// cloned AVX-512 kernel compared lanes one at a time (measured: the float32 cell test and
// the float32-representability scan ran scalar). Compiled with -march, they are vector
// instructions.
//
// The seam carries plain integers, doubles and pointers only, so no inline function of a
// shared header is emitted by a kernel unit with instructions the running CPU may lack.
// Contract: every kernel performs, in every lane, the scalar operations documented here and
// in fast_conv.hpp, so all three builds give bit-identical results.
#include <cstddef>
#include <cstdint>

namespace foldcheck::ref::detail {

// Per channel: the BatchNorm's scale enclosure and parameters (no BN: has_bn false).
struct ChannelAffine {
  bool has_bn = false;
  double t_hi = 1, t_lo = 0, t_rad = 0;  // scale = t_hi + t_lo within t_rad
  double mean = 0, beta = 0, bias = 0;   // bias: the conv's (0 if none)
};

// How a level blocks the row sums (fast_kernels.cpp states each level's choice and why):
// `pixels` output pixels per block (a divisor of kTilePixelsMax), and output channels per
// block (kOB) -- `ob_sums` when only the sums are kept, `ob_abs` with the sums of |x w| too,
// 1 when a group has fewer output channels than that (depthwise layers: 1, with several
// groups at once). fast_conv.cpp blocks the weights with these.
inline constexpr std::int64_t kOBMax = 8;
inline constexpr std::int64_t kTilePixelsMax = 16;
struct Blocking {
  std::int64_t pixels, ob_sums, ob_abs;
};

// One output row's sums. The input x holds, for every input channel c and kernel row kh,
// the padded input row the output row reads, at x + c * chan_step + kh * row_step (a
// panel of copied rows, or the padded input itself), readable up to kTilePixelsMax *
// stride_w + KW * dil_w past the padded width. Weights are blocked per group g and block b
// of kOB output channels (one of the level's Blocking) as
// w[g * group_stride + b * per * kOB + ((c * KH + kh) * KW + kw) * kOB + j], wabs their
// absolute values. The row's sums go to s, a (sum |x w|, if abs_sums) at
// [o * stride + ow] (o = g * og + b * kOB + j) and ax (sum |x|) at [g * stride + ow]; every
// block writes `pixels` lanes and kOB rows, so stride is a multiple of kTilePixelsMax and s,
// a have kOBMax spare rows.
struct RowSumsArgs {
  std::int64_t C, KH, KW, stride_w, dil_w, groups, og, OW;  // og: output channels per group
  const double* x;
  std::int64_t row_step, chan_step;
  const double* w;
  const double* wabs;
  std::int64_t group_stride, kOB, blocks_per_group;
  bool abs_sums;
  double *s, *a, *ax;
  std::int64_t stride;
};

// The epilogue for one output row of every channel o < O (fast_conv.hpp): for each of
// the row's `count` outputs, the enclosure of the layer output from the sum
// s[o * stride + i] with radius rf[o] * m (m = a[o * stride + i] with the bound data,
// else ax[(o / og) * stride + i]), a binary64 value written to hi and its radius to rad;
// the float32 rounding to r32 and ok = 1 when it is certified (always 1 when float32 is
// not asked for: want32 false); certified = ok ? formats : 0. Outputs of channel o are at
// [o * plane + i] of each output stream, r32 at [o * r32_plane + i], ok at [o * count + i]. Returns the number of
// outputs not certified. With the bound-data pointers set: conv, conv_rad,
// abs_sum = a * abs_factor, abs_x_sum = ax * abs_x_factor. The row buffers may be read up
// to 7 entries past count (stride is a multiple of 16).
struct FinishArgs {
  const double *s, *a, *ax;
  std::int64_t stride, og, O, count, plane;
  const ChannelAffine* channels;
  const double* rf;
  bool bounds, want32;
  double abs_factor, abs_x_factor;
  double *hi, *rad, *r32;
  std::int64_t r32_plane;
  std::uint8_t* ok;
  std::uint8_t formats;
  std::uint8_t* certified;
  double *conv, *conv_rad, *abs_sum, *abs_x_sum;  // null: not asked for
};

struct Kernels {
  const char* name;  // the level: isa_v4, isa_v3 or isa_base
  Blocking blocking;
  void (*row_sums)(const RowSumsArgs&);
  std::int64_t (*finish_row)(const FinishArgs&);
  bool (*all_float32)(const double* v, std::size_t n);  // every v[i] float32 or NaN
};

namespace isa_v4 {
Kernels kernels();
}
namespace isa_v3 {
Kernels kernels();
}
namespace isa_base {
Kernels kernels();
}

}  // namespace foldcheck::ref::detail
