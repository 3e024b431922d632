#pragma once
// The conv's accumulation orders, written once over the number type (float / double for
// the float path, XNum for attribution), so attribution replays exactly what evaluate()
// computes. Internal to the harness.
//
// Contract: conv_output() computes one output element as the engines' loops do: the
// products of in-bounds positions in (c, kh, kw) order (im2col's K order; padded
// positions contribute exact zeros and are skipped), summed
//   sequential  acc = acc + x*w                      (fma: acc = fma(x, w, acc))
//   pairwise    recursive halving of the product list
//   blocked     K split into blocks of `block` terms, each summed sequentially from zero
//               (a GEMM micro-kernel's register accumulator), block sums added in order
// then the conv bias added with one more rounding (order.bias_first, sequential or blocked: the
// accumulator starts from the bias instead). winograd_tile() computes a 2x2 output
// tile with F(2x2,3x3) (Lavin & Gray 2016): U = G g G^T per (o, c), V = B^T d B per
// input tile, M = sum_c U.V (sequential over c; fma contracts), Y = A^T M A, + bias.
#include <array>
#include <cstdint>
#include <vector>

#include "foldcheck/numerics/num_ops.hpp"
#include "foldcheck/layer/order.hpp"
#include "foldcheck/reference/layer.hpp"

namespace foldcheck::detail {

template <class N>
N pairwise_sum(const N* p, std::size_t n) {
  if (n == 1) return p[0];
  const std::size_t h = (n + 1) / 2;
  return pairwise_sum(p, h) + pairwise_sum(p + h, n - h);
}

// One output (n, o, oh, ow) of a direct-order conv. x: NCHW input; wo: output channel
// o's weights ((C/groups) x KH x KW); bias: nullptr or channel o's bias; prods: scratch of
// terms_per_output() elements. The window is walked by ref::for_each_window_term.
template <class N>
N conv_output(const ref::ConvGeometry& g, const N* x, const N* wo, const N* bias, const Order& order, bool fma,
              std::int64_t n, std::int64_t o, std::int64_t oh, std::int64_t ow, N* prods) {
  const bool first = bias && order.bias_first && order.kind != Accumulation::Pairwise;
  N acc(first ? *bias : N(0.0)), block_acc(0.0);
  std::size_t k = 0;
  std::int64_t in_block = 0;
  const bool seq = order.kind == Accumulation::Sequential, blocked = order.kind == Accumulation::Blocked;
  const std::size_t w_first = static_cast<std::size_t>(o * g.terms_per_output());  // channel o's first weight
  ref::for_each_window_term(g, n, o, oh, ow, [&](std::size_t xi, std::size_t w_index) {
    const std::size_t wi = w_index - w_first;
    if (seq) {
      acc = madd(x[xi], wo[wi], acc, fma);
    } else if (blocked) {
      block_acc = madd(x[xi], wo[wi], block_acc, fma);
      if (++in_block == order.block) {
        acc = acc + block_acc;
        block_acc = N(0.0);
        in_block = 0;
      }
    } else {
      prods[k++] = x[xi] * wo[wi];
    }
  });
  if (blocked && in_block > 0) acc = acc + block_acc;
  if (order.kind == Accumulation::Pairwise && k > 0) acc = pairwise_sum(prods, k);
  if (bias && !first) acc = acc + *bias;
  return acc;
}

// F(2x2,3x3) filter transform of one 3x3 filter g (row-major) into U (4x4 row-major).
// G = [[1,0,0],[1/2,1/2,1/2],[1/2,-1/2,1/2],[0,0,1]]; the halvings are exact barring underflow.
template <class N>
void winograd_filter(const N* g, N* U) {
  const N half(0.5);
  N S[4][3];
  for (int j = 0; j < 3; ++j) {
    S[0][j] = g[j];
    S[1][j] = ((g[j] + g[3 + j]) + g[6 + j]) * half;
    S[2][j] = ((g[j] - g[3 + j]) + g[6 + j]) * half;
    S[3][j] = g[6 + j];
  }
  for (int i = 0; i < 4; ++i) {
    U[i * 4 + 0] = S[i][0];
    U[i * 4 + 1] = ((S[i][0] + S[i][1]) + S[i][2]) * half;
    U[i * 4 + 2] = ((S[i][0] - S[i][1]) + S[i][2]) * half;
    U[i * 4 + 3] = S[i][2];
  }
}

// The 2x2 output tile whose top-left output is (n, o, oh0, ow0); U: this o's transformed
// filters, cg x 16; bias: nullptr or channel o's bias. out: 4 values row-major (entries
// beyond the output are computed on padding and discarded by the caller).
template <class N>
void winograd_tile(const ref::ConvGeometry& g, const N* x, const N* U, const N* bias, bool fma, std::int64_t n,
                   std::int64_t o, std::int64_t oh0, std::int64_t ow0, N* out) {
  const std::int64_t cg = g.C / g.groups, og = g.O / g.groups, c0 = (o / og) * cg;
  N M[16];
  for (auto& m : M) m = N(0.0);
  for (std::int64_t ci = 0; ci < cg; ++ci) {
    N d[4][4];
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 4; ++j) {
        const std::int64_t ih = oh0 - g.pad_top + i, iw = ow0 - g.pad_left + j;
        d[i][j] = (ih < 0 || ih >= g.H || iw < 0 || iw >= g.W) ? N(0.0) : x[((n * g.C + c0 + ci) * g.H + ih) * g.W + iw];
      }
    // B^T = [[1,0,-1,0],[0,1,1,0],[0,-1,1,0],[0,1,0,-1]]: T = B^T d, V = T B.
    N T[4][4], V[4][4];
    for (int j = 0; j < 4; ++j) {
      T[0][j] = d[0][j] - d[2][j];
      T[1][j] = d[1][j] + d[2][j];
      T[2][j] = d[2][j] - d[1][j];
      T[3][j] = d[1][j] - d[3][j];
    }
    for (int i = 0; i < 4; ++i) {
      V[i][0] = T[i][0] - T[i][2];
      V[i][1] = T[i][1] + T[i][2];
      V[i][2] = T[i][2] - T[i][1];
      V[i][3] = T[i][1] - T[i][3];
    }
    const N* u = &U[ci * 16];
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 4; ++j) M[i * 4 + j] = madd(u[i * 4 + j], V[i][j], M[i * 4 + j], fma);
  }
  // A^T = [[1,1,1,0],[0,1,-1,-1]]: Z = A^T M (2x4), Y = Z A (2x2).
  N Z[2][4];
  for (int j = 0; j < 4; ++j) {
    Z[0][j] = (M[j] + M[4 + j]) + M[8 + j];
    Z[1][j] = (M[4 + j] - M[8 + j]) - M[12 + j];
  }
  for (int i = 0; i < 2; ++i) {
    out[i * 2 + 0] = (Z[i][0] + Z[i][1]) + Z[i][2];
    out[i * 2 + 1] = (Z[i][1] - Z[i][2]) - Z[i][3];
    if (bias) {
      out[i * 2 + 0] = out[i * 2 + 0] + *bias;
      out[i * 2 + 1] = out[i * 2 + 1] + *bias;
    }
  }
}

}  // namespace foldcheck::detail
