#include "fast_conv.hpp"

#include <algorithm>
#include <cblas.h>
#include <cmath>
#include <thread>

namespace foldcheck::ref::detail {
namespace {

constexpr std::int64_t kChunk = 1024;  // columns (output pixels) per dgemm

// Direct loop: one output at a time (depthwise and other small-K convs).
void direct(const ConvGeometry& g, const std::vector<double>& x, const std::vector<double>& w, std::int64_t o,
            ConvSums& out) {
  const std::int64_t cg = g.C / g.groups, og = g.O / g.groups, c0 = (o / og) * cg, OH = g.OH(), OW = g.OW();
  for (std::int64_t n = 0; n < g.N; ++n)
    for (std::int64_t oh = 0; oh < OH; ++oh)
      for (std::int64_t ow = 0; ow < OW; ++ow) {
        double s = 0, a = 0, ax = 0;
        for (std::int64_t ci = 0; ci < cg; ++ci)
          for (std::int64_t kh = 0; kh < g.KH; ++kh) {
            const std::int64_t ih = oh * g.stride_h - g.pad_top + kh * g.dil_h;
            if (ih < 0 || ih >= g.H) continue;
            for (std::int64_t kw = 0; kw < g.KW; ++kw) {
              const std::int64_t iw = ow * g.stride_w - g.pad_left + kw * g.dil_w;
              if (iw < 0 || iw >= g.W) continue;
              const double xv = x[((n * g.C + c0 + ci) * g.H + ih) * g.W + iw];
              const double p = xv * w[((o * cg + ci) * g.KH + kh) * g.KW + kw];
              s += p;
              a += std::fabs(p);
              ax += std::fabs(xv);
            }
          }
        const std::size_t i = static_cast<std::size_t>(((n * g.O + o) * OH + oh) * OW + ow);
        out.s[i] = s;
        out.a[i] = a;
        out.ax[i] = ax;
      }
}

// One chunk of columns [p0, p0 + nc) of group gi through dgemm.
void chunk(const ConvGeometry& g, const std::vector<double>& x, const std::vector<double>& w,
           const std::vector<double>& wabs, std::int64_t gi, std::int64_t p0, std::int64_t nc, std::vector<double>& X,
           std::vector<double>& XA, std::vector<double>& C1, std::vector<double>& C2, ConvSums& out) {
  const std::int64_t cg = g.C / g.groups, og = g.O / g.groups, K = cg * g.KH * g.KW, OH = g.OH(), OW = g.OW();
  X.assign(static_cast<std::size_t>(K * nc), 0.0);
  XA.assign(static_cast<std::size_t>(K * nc), 0.0);
  std::vector<double> ax(static_cast<std::size_t>(nc), 0.0);
  for (std::int64_t j = 0; j < nc; ++j) {
    const std::int64_t p = p0 + j, ow = p % OW, oh = (p / OW) % OH, n = p / (OW * OH);
    std::int64_t k = 0;
    for (std::int64_t ci = 0; ci < cg; ++ci)
      for (std::int64_t kh = 0; kh < g.KH; ++kh) {
        const std::int64_t ih = oh * g.stride_h - g.pad_top + kh * g.dil_h;
        for (std::int64_t kw = 0; kw < g.KW; ++kw, ++k) {
          const std::int64_t iw = ow * g.stride_w - g.pad_left + kw * g.dil_w;
          if (ih < 0 || ih >= g.H || iw < 0 || iw >= g.W) continue;
          const double v = x[((n * g.C + gi * cg + ci) * g.H + ih) * g.W + iw];
          X[k * nc + j] = v;
          XA[k * nc + j] = std::fabs(v);
          ax[j] += std::fabs(v);
        }
      }
  }
  C1.resize(static_cast<std::size_t>(og * nc));
  C2.resize(static_cast<std::size_t>(og * nc));
  const double* wg = &w[static_cast<std::size_t>(gi * og * K)];
  const double* wa = &wabs[static_cast<std::size_t>(gi * og * K)];
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(og), static_cast<int>(nc), static_cast<int>(K),
              1.0, wg, static_cast<int>(K), X.data(), static_cast<int>(nc), 0.0, C1.data(), static_cast<int>(nc));
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(og), static_cast<int>(nc), static_cast<int>(K),
              1.0, wa, static_cast<int>(K), XA.data(), static_cast<int>(nc), 0.0, C2.data(), static_cast<int>(nc));
  for (std::int64_t ol = 0; ol < og; ++ol) {
    const std::int64_t o = gi * og + ol;
    for (std::int64_t j = 0; j < nc; ++j) {
      const std::int64_t p = p0 + j, ow = p % OW, oh = (p / OW) % OH, n = p / (OW * OH);
      const std::size_t i = static_cast<std::size_t>(((n * g.O + o) * OH + oh) * OW + ow);
      out.s[i] = C1[ol * nc + j];
      out.a[i] = C2[ol * nc + j];
      out.ax[i] = ax[j];
    }
  }
}

}  // namespace

void conv_sums(const ConvGeometry& g, const std::vector<double>& x, const std::vector<double>& w, unsigned threads,
               ConvSums& out) {
  const std::size_t total = static_cast<std::size_t>(g.output_size());
  out.s.assign(total, 0.0);
  out.a.assign(total, 0.0);
  out.ax.assign(total, 0.0);
  const std::int64_t cg = g.C / g.groups, og = g.O / g.groups, K = cg * g.KH * g.KW;
  const std::int64_t P = g.N * g.OH() * g.OW();
  unsigned nt = threads ? threads : std::max(1u, std::thread::hardware_concurrency());
  openblas_set_num_threads(1);  // our threads own the parallelism (fixed chunks: deterministic)
  if (K < 16 || og < 4) {
    nt = static_cast<unsigned>(std::min<std::int64_t>(nt, g.O));
    std::vector<std::thread> pool;
    for (unsigned t = 1; t < nt; ++t)
      pool.emplace_back([&, t] {
        for (std::int64_t o = t; o < g.O; o += nt) direct(g, x, w, o, out);
      });
    for (std::int64_t o = 0; o < g.O; o += nt) direct(g, x, w, o, out);
    for (auto& th : pool) th.join();
    return;
  }
  std::vector<double> wabs(w.size());
  for (std::size_t i = 0; i < w.size(); ++i) wabs[i] = std::fabs(w[i]);
  const std::int64_t chunks = (P + kChunk - 1) / kChunk, tasks = g.groups * chunks;
  nt = static_cast<unsigned>(std::min<std::int64_t>(nt, tasks));
  auto work = [&](unsigned t) {
    std::vector<double> X, XA, C1, C2;
    for (std::int64_t k = t; k < tasks; k += nt) {
      const std::int64_t gi = k / chunks, c = k % chunks;
      const std::int64_t p0 = c * kChunk;
      chunk(g, x, w, wabs, gi, p0, std::min(kChunk, P - p0), X, XA, C1, C2, out);
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < nt; ++t) pool.emplace_back(work, t);
  work(0);
  for (auto& th : pool) th.join();
}

}  // namespace foldcheck::ref::detail
