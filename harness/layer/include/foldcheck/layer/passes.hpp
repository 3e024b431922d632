#pragma once
// A compiler pass pipeline over a conv+BN layer, modelled on TVM's Relay passes, for
// `foldcheck bisect`. Each pass rewrites a declarative description of how the layer will
// be computed (Lowering); realize() turns the description into the graph IR and the
// arithmetic policy that evaluate.hpp runs. Every pass preserves the layer's value in
// exact arithmetic — only roundings change — except FastMath (an approximation) and
// Quantize (int8 values), which is what the bisect verdicts are about.
//
// The passes (opt level as in TVM's PassContext):
//   SimplifyInference (0)  BatchNorm -> x * a + (beta - mean * a), a = (1/sqrt(var + eps)) * gamma
//   FoldConstant      (2)  per-channel constants are evaluated at compile time, in float32
//                          with IEEE operations; a later FastMath finds no runtime rsqrt
//   FoldScaleAxis     (3)  the multiply by a folds into the conv weights and the shift into
//                          its bias (TVM's recipe); needs SimplifyInference first
//   SimplifyExpr      (2)  x / sqrt(a) -> x * (1/sqrt(a)) (one more rounding)
//   FastMath          (4)  a runtime 1/sqrt(a) becomes the hardware 12-bit estimate with no
//                          Newton step (not an IEEE operation: beyond the rounding bound);
//                          constants already folded are not touched
//   FuseOps           (1)  the conv's separate per-channel add (TVM's post-fold shift) moves
//                          into the conv epilogue: bias' = bias + add, rounded once at compile time
//   AlterOpLayout     (3)  NCHW16c blocking: the accumulation runs in K-blocks of 16 terms
//   Winograd          (3)  F(2x2,3x3) convolution (3x3, stride 1, dilation 1; else not applicable)
//   Quantize          (-)  int8: weights per output channel and the input per tensor, symmetric,
//                          power-of-two scales (not a rounding of the float computation)
// Passes run in the order given; one whose precondition does not hold is a recorded no-op.
#include <functional>
#include <string>
#include <vector>

#include "foldcheck/layer/evaluate.hpp"
#include "foldcheck/layer/graph.hpp"

namespace foldcheck {

struct Lowering {
  bool scale_shift = false;       // SimplifyInference
  bool constants_folded = false;  // FoldConstant
  bool folded = false;            // FoldScaleAxis
  bool rsqrt_multiply = false;    // SimplifyExpr
  bool fast_rsqrt = false;        // FastMath on a runtime rsqrt
  bool fuse_epilogue = false;     // FuseOps
  bool blocked = false;           // AlterOpLayout
  bool winograd = false;          // Winograd
  bool quantized = false;         // Quantize
  std::vector<std::string> applied, skipped;  // pass names; skipped with the reason
};

struct PassInfo {
  std::string name;
  int opt_level;  // the TVM opt_level that enables it (Quantize: never by level, -1)
  std::string what;
  // Applies to the lowering; returns "" or the reason it does not apply.
  std::function<std::string(Lowering&, const Graph&)> apply;
};

const std::vector<PassInfo>& all_passes();   // in TVM's order
const PassInfo& pass_named(const std::string& name);  // InputError listing the names

// The pipeline for --passes (names, in order), or for an opt level minus --disabled-pass.
std::vector<std::string> pipeline_for(int opt_level, const std::vector<std::string>& disabled);

// Runs passes[0..count) on the layer (a Conv -> BatchNorm graph).
Lowering lower(const Graph& layer, const std::vector<std::string>& passes, std::size_t count);

// The lowered layer as the graph and policy evaluate() runs, and its input (Quantize
// quantizes it). `ieee`: the same lowering with every operation an IEEE one (FastMath
// undone): its FoldInfo and policy give the bound a correct compiler must meet.
struct Realized {
  Graph graph;
  Policy policy;
  std::vector<double> input;
  std::string note;  // how it computes, for people
};
Realized realize(const Lowering& l, const Graph& layer, const std::vector<double>& x, const ref::Options& ref,
                 bool ieee = false);

}  // namespace foldcheck
