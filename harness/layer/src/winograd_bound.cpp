// Winograd F(m x m, 3 x 3)'s error bound (foldcheck/layer/winograd_bound.hpp).
#include "foldcheck/layer/winograd_bound.hpp"

#include <cmath>
#include <string>

#include "foldcheck/base/errors.hpp"
#include "foldcheck/numerics/bounded.hpp"

namespace foldcheck {
namespace {

WinogradMatrices f2() {
  return {2,
          4,
          {1, 0, -1, 0, 0, 1, 1, 0, 0, -1, 1, 0, 0, 1, 0, -1},
          {1, 0, 0, 0.5, 0.5, 0.5, 0.5, -0.5, 0.5, 0, 0, 1},
          {1, 1, 1, 0, 0, 1, -1, -1}};
}

WinogradMatrices f4() {
  return {4,
          6,
          {4, 0,  -5, 0, 1, 0, 0, -4, -4, 1,  1, 0, 0, 4, -4, -1, 1, 0,
           0, -2, -1, 2, 1, 0, 0, 2,  -1, -2, 1, 0, 0, 4, 0,  -5, 0, 1},
          {1.0 / 4, 0, 0, -1.0 / 6, -1.0 / 6, -1.0 / 6, -1.0 / 6, 1.0 / 6, -1.0 / 6, 1.0 / 24, 1.0 / 12, 1.0 / 6,
           1.0 / 24, -1.0 / 12, 1.0 / 6, 0, 0, 1},
          {1, 1, 1, 1, 1, 0, 0, 1, -1, 2, -2, 0, 0, 1, 1, 4, 4, 0, 0, 1, -1, 8, -8, 1}};
}

// oneDNN's F(4x4,3x3): benchdnn's trans_I/W/O_4x4_3x3 written as matrices (its float
// literals are these rationals rounded: 32/119 = 0.26890756302521, 2048/2975, 128/1071,
// 256/595, 64/357, 256/225).
WinogradMatrices f4_onednn() {
  return {4,
          6,
          {0.87890625, 0,          -2.640625, 0,         1, 0,  //
           0,          -1.40625,   -2.25,     0.625,     1, 0,  //
           0,          1.40625,    -2.25,     -0.625,    1, 0,  //
           0,          -0.5859375, -0.390625, 1.5,       1, 0,  //
           0,          0.5859375,  -0.390625, -1.5,      1, 0,  //
           0,          0.87890625, 0,         -2.640625, 0, 1},
          {256.0 / 225, 0, 0,                          //
           -2048.0 / 2975, -256.0 / 595, -32.0 / 119,  //
           -2048.0 / 2975, 256.0 / 595, -32.0 / 119,   //
           128.0 / 1071, 64.0 / 357, 32.0 / 119,       //
           128.0 / 1071, -64.0 / 357, 32.0 / 119,      //
           0, 0, 1},
          {1,     1,           1,
           1,     1,           0,  //
           0,     0.625,       -0.625,
           1.5,   -1.5,        0,  //
           0,     0.390625,    0.390625,
           2.25,  2.25,        0,  //
           0,     0.244140625, -0.244140625,
           3.375, -3.375,      1}};
}

WinogradMatrices f6() {
  const double a = 21.0 / 4, b = 17.0 / 4;
  return {6,
          8,
          {1, 0,    -a,   0,    a,     0,    -1, 0,  //
           0, 1,    1,    -b,   -b,    1,    1,  0,  //
           0, -1,   1,    b,    -b,    -1,   1,  0,  //
           0, 0.5,  0.25, -2.5, -1.25, 2,    1,  0,  //
           0, -0.5, 0.25, 2.5,  -1.25, -2,   1,  0,  //
           0, 2,    4,    -2.5, -5,    0.5,  1,  0,  //
           0, -2,   4,    2.5,  -5,    -0.5, 1,  0,  //
           0, -1,   0,    a,    0,     -a,   0,  1},
          {1,         0,          0,         //
           -2.0 / 9,  -2.0 / 9,   -2.0 / 9,  //
           -2.0 / 9,  2.0 / 9,    -2.0 / 9,  //
           1.0 / 90,  1.0 / 45,   2.0 / 45,  //
           1.0 / 90,  -1.0 / 45,  2.0 / 45,  //
           32.0 / 45, 16.0 / 45,  8.0 / 45,  //
           32.0 / 45, -16.0 / 45, 8.0 / 45,  //
           0,         0,          1},
          {1, 1, 1,  1,  1,   1,        1,         0,  //
           0, 1, -1, 2,  -2,  0.5,      -0.5,      0,  //
           0, 1, 1,  4,  4,   0.25,     0.25,      0,  //
           0, 1, -1, 8,  -8,  0.125,    -0.125,    0,  //
           0, 1, 1,  16, 16,  1.0 / 16, 1.0 / 16,  0,  //
           0, 1, -1, 32, -32, 1.0 / 32, -1.0 / 32, 1}};
}

// |P| Q |R| for |P| (r x k), Q (k x k'), |R| given transposed as Rt (c x k'): r x c.
std::vector<double> abs_sandwich(const std::vector<double>& P, int r, int k, const std::vector<double>& Q, int kp,
                                 const std::vector<double>& Rt, int c) {
  std::vector<double> t(static_cast<std::size_t>(r * kp), 0.0), out(static_cast<std::size_t>(r * c), 0.0);
  for (int i = 0; i < r; ++i)
    for (int j = 0; j < k; ++j)
      for (int l = 0; l < kp; ++l) t[i * kp + l] += std::fabs(P[i * k + j]) * Q[j * kp + l];
  for (int i = 0; i < r; ++i)
    for (int l = 0; l < kp; ++l)
      for (int j = 0; j < c; ++j) out[i * c + j] += t[i * kp + l] * std::fabs(Rt[j * kp + l]);
  return out;
}

}  // namespace

const WinogradMatrices& winograd_matrices(int m, WinogradPoints points) {
  static const WinogradMatrices m2 = f2(), m4 = f4(), m6 = f6(), m4o = f4_onednn();
  if (points == WinogradPoints::OneDnn) {
    if (m == 4) return m4o;
    throw InputError("oneDNN's Winograd transform is F(4 x 4, 3 x 3), not F(" + std::to_string(m) + " x " +
                     std::to_string(m) + ", 3 x 3)");
  }
  if (m == 2) return m2;
  if (m == 4) return m4;
  if (m == 6) return m6;
  throw InputError("Winograd tiles are 2, 4 or 6 (F(m x m, 3 x 3)), not " + std::to_string(m));
}

WinogradBound winograd_bound(const ref::ConvGeometry& g, const std::vector<double>& x, const std::vector<double>& w,
                             const std::vector<double>& bias, int m, WinogradPoints points) {
  if (g.KH != 3 || g.KW != 3 || g.stride_h != 1 || g.stride_w != 1 || g.dil_h != 1 || g.dil_w != 1)
    throw InputError("Winograd F(m x m, 3 x 3) computes 3 x 3 convs of stride 1 and dilation 1 only");
  const WinogradMatrices& M = winograd_matrices(m, points);
  const int n = M.n;
  const std::int64_t cg = g.C / g.groups, og = g.O / g.groups, OH = g.OH(), OW = g.OW();
  // |G| |g_oc| |G^T| per (o, ci): n x n each.
  std::vector<std::vector<double>> U(static_cast<std::size_t>(g.O * cg));
  for (std::int64_t o = 0; o < g.O; ++o)
    for (std::int64_t ci = 0; ci < cg; ++ci) {
      std::vector<double> k(9);
      for (int i = 0; i < 9; ++i) k[i] = std::fabs(w[static_cast<std::size_t>((o * cg + ci) * 9 + i)]);
      U[static_cast<std::size_t>(o * cg + ci)] = abs_sandwich(M.G, n, 3, k, 3, M.G, n);
    }
  WinogradBound r;
  r.roundings = 4.0 * n + static_cast<double>(cg) + 9 + (points == WinogradPoints::OneDnn ? 4 : 0);
  r.W.assign(static_cast<std::size_t>(g.output_size()), 0.0);
  std::vector<double> d(static_cast<std::size_t>(n * n)), acc(static_cast<std::size_t>(n * n));
  for (std::int64_t b = 0; b < g.N; ++b)
    for (std::int64_t th = 0; th < OH; th += m)
      for (std::int64_t tw = 0; tw < OW; tw += m)
        for (std::int64_t grp = 0; grp < g.groups; ++grp) {
          std::vector<std::vector<double>> V(static_cast<std::size_t>(cg));
          for (std::int64_t ci = 0; ci < cg; ++ci) {
            const std::int64_t c = grp * cg + ci;
            for (int i = 0; i < n; ++i)
              for (int j = 0; j < n; ++j) {
                const std::int64_t ih = th - g.pad_top + i, iw = tw - g.pad_left + j;
                const bool in = ih >= 0 && ih < g.H && iw >= 0 && iw < g.W;
                d[i * n + j] = in ? std::fabs(x[static_cast<std::size_t>(((b * g.C + c) * g.H + ih) * g.W + iw)]) : 0.0;
              }
            V[static_cast<std::size_t>(ci)] = abs_sandwich(M.BT, n, n, d, n, M.BT, n);
          }
          for (std::int64_t oi = 0; oi < og; ++oi) {
            const std::int64_t o = grp * og + oi;
            std::fill(acc.begin(), acc.end(), 0.0);
            for (std::int64_t ci = 0; ci < cg; ++ci) {
              const std::vector<double>&u = U[static_cast<std::size_t>(o * cg + ci)],
                    &v = V[static_cast<std::size_t>(ci)];
              for (int e = 0; e < n * n; ++e) acc[e] += u[e] * v[e];
            }
            const std::vector<double> y = abs_sandwich(M.AT, m, n, acc, n, M.AT, m);
            for (int i = 0; i < m && th + i < OH; ++i)
              for (int j = 0; j < m && tw + j < OW; ++j)
                r.W[static_cast<std::size_t>(((b * g.O + o) * OH + th + i) * OW + tw + j)] =
                    round_up(kWinogradSlack * y[i * m + j] * (1 + 0x1p-40) +
                             (bias.empty() ? 0.0 : std::fabs(bias[static_cast<std::size_t>(o)])));
          }
        }
  return r;
}

}  // namespace foldcheck
