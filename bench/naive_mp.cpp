#include "naive_mp.hpp"

#include <boost/multiprecision/cpp_bin_float.hpp>
#include <thread>

namespace foldcheck::bench {

using mp = boost::multiprecision::cpp_bin_float_50;

std::vector<float> naive_mp_conv_bn(const ref::ConvGeometry& g, const std::vector<double>& x,
                                    const std::vector<double>& w, const ref::BnParams& bn, std::int64_t o0,
                                    std::int64_t o1, unsigned threads) {
  const std::int64_t OH = g.OH(), OW = g.OW(), cg = g.C / g.groups, og = g.O / g.groups;
  std::vector<float> out(static_cast<std::size_t>((o1 - o0) * OH * OW * g.N));
  auto channel = [&](std::int64_t o) {
    const mp s = mp(bn.gamma[o]) / sqrt(mp(bn.var[o]) + mp(bn.eps));
    const std::int64_t c0 = (o / og) * cg;
    for (std::int64_t n = 0; n < g.N; ++n)
      for (std::int64_t oh = 0; oh < OH; ++oh)
        for (std::int64_t ow = 0; ow < OW; ++ow) {
          // The window walked by hand, not by ref::for_each_window_term: this baseline is
          // independent of the code it measures.
          mp acc = 0;
          for (std::int64_t ci = 0; ci < cg; ++ci)
            for (std::int64_t kh = 0; kh < g.KH; ++kh) {
              const std::int64_t ih = oh * g.stride_h - g.pad_top + kh * g.dil_h;
              if (ih < 0 || ih >= g.H) continue;
              for (std::int64_t kw = 0; kw < g.KW; ++kw) {
                const std::int64_t iw = ow * g.stride_w - g.pad_left + kw * g.dil_w;
                if (iw < 0 || iw >= g.W) continue;
                acc += mp(x[((n * g.C + c0 + ci) * g.H + ih) * g.W + iw]) * mp(w[((o * cg + ci) * g.KH + kh) * g.KW + kw]);
              }
            }
          const mp y = (acc - mp(bn.mean[o])) * s + mp(bn.beta[o]);
          out[static_cast<std::size_t>((((n * (o1 - o0)) + (o - o0)) * OH + oh) * OW + ow)] = static_cast<float>(y);
        }
  };
  const unsigned nt = std::max(1u, threads);
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < nt; ++t)
    pool.emplace_back([&, t] {
      for (std::int64_t o = o0 + t; o < o1; o += nt) channel(o);
    });
  for (std::int64_t o = o0; o < o1; o += nt) channel(o);
  for (auto& th : pool) th.join();
  return out;
}

}  // namespace foldcheck::bench
