#pragma once
// A conv's accumulation order: the vocabulary the float paths, the bounds, the case files
// and the commands share (the kernels that run each order: src/conv_kernels.hpp; the
// number of roundings each order lets a term suffer: evaluate.hpp).
#include <cstdint>
#include <string>

#include "foldcheck/reference/layer.hpp"

namespace foldcheck {

enum class Accumulation { Sequential, Pairwise, Blocked, Winograd };
const char* name(Accumulation a);

struct Order {
  Accumulation kind = Accumulation::Sequential;
  std::int64_t block = 64;  // K-block of Blocked
  // The conv bias is the accumulator's first value (oneDNN's and PyTorch's slow conv kernels
  // start from it), not added after the sum: every partial sum carries it. Sequential and
  // blocked orders; the honest samples use it (honest_samples.hpp), no command line order.
  bool bias_first = false;
  Order() = default;
  Order(Accumulation k, std::int64_t b = 64) : kind(k), block(b) {}  // NOLINT: implicit
  std::string label() const;  // "sequential", "blocked:64", ...
  bool operator==(const Order&) const = default;
};
// "sequential", "pairwise", "blocked" (K-block 64), "blocked:K", "winograd"; throws InputError.
Order order_from_name(const std::string& n);
// Whether F(2x2,3x3) applies to this conv (3x3, stride 1, dilation 1).
bool winograd_applies(const ref::ConvGeometry& g);
// Throws InputError naming the reason if the order cannot run this conv (Winograd: 3x3,
// stride 1, dilation 1 only).
void check_order(const Order& o, const ref::ConvGeometry& g);

}  // namespace foldcheck
