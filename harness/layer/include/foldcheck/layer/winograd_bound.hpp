#pragma once
// The componentwise rounding-error bound of a conv computed by Winograd's minimal filtering
// algorithm F(m x m, 3 x 3) (Lavin & Gray 2016; the matrices NNPACK, oneDNN and cuDNN use, with
// interpolation points 0, +-1, +-2, +-1/2 and infinity), m = 2, 4 or 6, in float32.
//
// Contract: per n x n input tile d_c (n = m + 2) and output channel o the algorithm computes
//   Y = A^T [ sum_c (G g_oc G^T) (.) (B^T d_c B) ] A   (+ the bias)
// as a composition of sums of products. Every term of the exact output is a product along one
// path through the stages; in floating point that path picks up at most N roundings:
//   weight transform G g G^T     8  (each of G's coefficients rounded to float32 once per side
//                                    (1/6, 2/9, 1/90 ... are not binary), a product, a 3-term sum)
//   input transform B^T d B      2n (B's coefficients are binary fractions (21/4, 5/2, 1/2):
//                                    exact; an n-term sum per side)
//   Hadamard product and the
//   channel sum                  C  (a product and C - 1 additions; C the channels per group)
//   output transform A^T M A     2n (A's coefficients are powers of two: exact)
//   bias                         1
// so, by the path argument of Higham's sums of products (each computed value is the exact
// sum of its paths' products, each times prod (1 + delta) over at most N roundings),
//   |Y_hat - Y| <= gamma_N(u) W,   W = |A^T| [ sum_c (|G| |g_oc| |G^T|) (.) (|B^T| |d_c| |B|) ] |A| (+ |b|)
// with N = 4n + C + 9. W is what the same algorithm computes on the magnitudes; W >= sum |x w|
// (the transforms' coefficients do not cancel in magnitude), and grows with the tile: the
// larger tiles' interpolation points make the transforms' coefficients large (F(6x6): A has 32,
// G has 32/45), which is the error growth Winograd is known for. A factored evaluation of the
// transforms (shared subexpressions, as NNPACK and oneDNN write them) has the same coefficient
// magnitudes along every path only if no subexpression is reused with cancelling signs; a
// factor kWinogradSlack = 2 on W is stated for that.
// oneDNN's F(4 x 4, 3 x 3) (its x64 wino_4x3 kernels, the transforms of benchdnn's
// ref_wino.cpp trans_I/W/O_4x4_3x3) interpolates at 0, +-5/8, +-3/2: its own matrices
// (WinogradPoints::OneDnn; exact rationals, checked to compute the conv), W up to 3.7x the
// other points'. Its factored weight transform rounds up to 5 times per side (coefficient, a
// product, three sums) where the count above charges 4: N + 4 is charged for it.
// Stride 1, dilation 1, 3 x 3 kernels only (where the algorithm applies); any padding, groups.
#include <vector>

#include "foldcheck/reference/layer.hpp"

namespace foldcheck {

inline constexpr double kWinogradSlack = 2.0;

enum class WinogradPoints { Lavin, OneDnn };  // 0, +-1, +-2, +-1/2 (m = 2, 4, 6); oneDNN's 0, +-5/8, +-3/2 (m = 4)

struct WinogradBound {
  std::vector<double> W;  // per output (NCHW), kWinogradSlack included, the bias's |b| added
  double roundings = 0;   // N
};

// Throws InputError when the geometry is not one Winograd F(m x m, 3 x 3) computes.
WinogradBound winograd_bound(const ref::ConvGeometry& g, const std::vector<double>& x, const std::vector<double>& w,
                             const std::vector<double>& bias, int m, WinogradPoints points = WinogradPoints::Lavin);

// The algorithm's matrices (exact values, row-major): B^T (n x n), G (n x 3), A^T (m x n).
struct WinogradMatrices {
  int m = 0, n = 0;
  std::vector<double> BT, G, AT;
};
// InputError for OneDnn with m other than 4.
const WinogradMatrices& winograd_matrices(int m, WinogradPoints points = WinogradPoints::Lavin);

}  // namespace foldcheck
