#include "fast_conv.hpp"

#include <algorithm>
#include <array>
#include <barrier>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <stdexcept>
#include <string>
#include <thread>

#include "foldcheck/reference/dd_arith.hpp"
#include "parallel.hpp"

namespace foldcheck::ref::detail {

namespace {

// The x86-64 levels the kernels were built for. GCC names the levels; clang 14 (the fuzz
// build) knows only the features, so it checks the ones the kernels' code uses.
bool cpu_level_v3() {
#if defined(__clang__)
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("bmi") &&
         __builtin_cpu_supports("bmi2");
#else
  return __builtin_cpu_supports("x86-64-v3");
#endif
}
bool cpu_level_v4() {
#if defined(__clang__)
  return cpu_level_v3() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
#else
  return __builtin_cpu_supports("x86-64-v4");
#endif
}

// The level FOLDCHECK_ISA names ("" when unset or empty: the best the CPU has), checked.
std::string requested_level() {
  const char* env = std::getenv("FOLDCHECK_ISA");
  const std::string v = env ? env : "";
  if (!v.empty() && v != "v4" && v != "v3" && v != "base")
    throw std::invalid_argument("FOLDCHECK_ISA=" + v + ": expected base, v3 or v4 (or unset: the best this CPU has)");
  return v;
}

Kernels select_kernels() {
  const std::string want = requested_level();
  const std::string best = cpu_level_v4() ? "v4" : cpu_level_v3() ? "v3" : "base";
  const std::string level = want.empty() ? best : want;
  if ((level == "v4" && best != "v4") || (level == "v3" && best == "base"))
    throw std::invalid_argument("FOLDCHECK_ISA=" + level + ": this CPU lacks x86-64-" + level + " (" +
                                (level == "v4" ? "AVX-512" : "AVX2 + FMA") + "); the best it has is " + best);
  return level == "v4" ? isa_v4::kernels() : level == "v3" ? isa_v3::kernels() : isa_base::kernels();
}

}  // namespace

const Kernels& kernels() {
  static const Kernels k = select_kernels();
  return k;
}

}  // namespace foldcheck::ref::detail

namespace foldcheck::ref {

const char* isa_level() { return detail::kernels().name + 4; }  // "isa_v3" -> "v3"

std::vector<const char*> available_isa_levels() {
  std::vector<const char*> v;
  if (detail::cpu_level_v4()) v.push_back("v4");
  if (detail::cpu_level_v3()) v.push_back("v3");
  v.push_back("base");
  return v;
}

}  // namespace foldcheck::ref

namespace foldcheck::ref::detail {

bool all_float32(const std::vector<double>& v, unsigned threads) {
  // Large inputs (a layer's activations: megabytes) are scanned in parallel chunks.
  const std::size_t n = v.size();
  const unsigned nt = n < (std::size_t{1} << 16) ? 1 : thread_count(threads, n);
  const std::size_t chunk = (n + nt - 1) / nt;
  std::vector<char> ok(nt, 1);
  const Kernels& K = kernels();  // a level FOLDCHECK_ISA names and the CPU lacks throws here, not in a worker
  parallel(nt, [&](unsigned t) {
    const std::size_t b = std::min(n, t * chunk), e = std::min(n, b + chunk);
    ok[t] = K.all_float32(v.data() + b, e - b);
  });
  return std::all_of(ok.begin(), ok.end(), [](char c) { return c != 0; });
}

namespace {

const std::size_t kF32 = format_index(kFloat32);

// The row panel: for every input channel c and kernel row kh, the input row that output
// row (n, oh) reads, with its padding made explicit ([c][kh][panel_w]; zeros for padded
// rows and columns and past the padded width, where the last tile's pixels beyond the row's
// end read lanes that are never used). The kernel then walks one compact block instead of
// C planes a page or more apart (1x1 layers with 256 channels were TLB- and prefetch-bound
// on the planes), and no padded copy of the whole input is made. Unlike a window walk
// (layer.hpp), the panel visits out-of-range rows too, to zero them.
void fill_panel(const ConvGeometry& g, const std::vector<double>& x, std::int64_t n, std::int64_t oh,
                std::int64_t panel_w, double* panel) {
  // The panel starts all zeros and only [0, padded width) of a row is ever written, so the
  // slack past it stays zero; the padding columns are rewritten because a row may hold
  // an out-of-range (all-zero) row one time and an input row the next.
  const std::int64_t Wp = g.W + g.pad_left + g.pad_right;
  for (std::int64_t c = 0; c < g.C; ++c)
    for (std::int64_t kh = 0; kh < g.KH; ++kh) {
      double* row = panel + (c * g.KH + kh) * panel_w;
      const std::int64_t ih = oh * g.stride_h - g.pad_top + kh * g.dil_h;
      if (ih < 0 || ih >= g.H) {
        std::fill_n(row, Wp, 0.0);
        continue;
      }
      std::fill_n(row, g.pad_left, 0.0);
      std::copy_n(&x[static_cast<std::size_t>(((n * g.C + c) * g.H + ih) * g.W)], g.W, row + g.pad_left);
      std::fill_n(row + g.pad_left + g.W, g.pad_right, 0.0);
    }
}

// Weights blocked per group and block of kOB output channels (fast_kernels.hpp), with zero
// weights for the channels a last block lacks (their outputs are discarded), and their
// absolute values.
struct BlockedWeights {
  std::int64_t kOB = 1, blocks_per_group = 1, group_stride = 0;
  std::vector<double> w, wabs;
};

BlockedWeights block_weights(const ConvGeometry& g, const std::vector<double>& w, bool abs_sums, const Blocking& k) {
  BlockedWeights b;
  const std::int64_t og = g.O / g.groups, cg = g.C / g.groups, per = cg * g.KH * g.KW;
  b.kOB = og >= k.ob_sums && !abs_sums ? k.ob_sums : og >= k.ob_abs ? k.ob_abs : 1;
  b.blocks_per_group = (og + b.kOB - 1) / b.kOB;
  b.group_stride = b.blocks_per_group * per * b.kOB;
  b.w.assign(static_cast<std::size_t>(g.groups * b.group_stride), 0.0);
  for (std::int64_t gi = 0; gi < g.groups; ++gi)
    for (std::int64_t ol = 0; ol < og; ++ol)
      for (std::int64_t k = 0; k < per; ++k)
        b.w[static_cast<std::size_t>(gi * b.group_stride + ((ol / b.kOB) * per + k) * b.kOB + ol % b.kOB)] =
            w[static_cast<std::size_t>((gi * og + ol) * per + k)];
  b.wabs = b.w;
  for (double& d : b.wabs) d = std::fabs(d);
  return b;
}

// The layer output's enclosure y = yh + yl +- r from the conv's c (an exact double-double)
// +- Ec: the BatchNorm (c - mean) * t + beta in double-double arithmetic with the bounds of
// dd_arith.hpp (kOpRel per operation) on the certified enclosure t_hi + t_lo +- t_rad of
// the scale; the factor 1 + 2^-40 and the last 2 kOpRel term cover the roundings in
// evaluating r itself and the endpoints y +- r formed by certify_cell.
void enclose_affine(const dd::DD& c, double Ec, const ChannelAffine& ch, double& yh, double& yl, double& r) {
  if (ch.has_bn) {
    const dd::DD t{ch.t_hi, ch.t_lo};
    const dd::DD d = dd::plus_fp(c, -ch.mean);
    const double rad_d = Ec + dd::kOpRel * dd::mag(d);
    const dd::DD p = dd::times_dd(d, t);
    const double rad_p = (dd::mag(d) + rad_d) * ch.t_rad + dd::mag(t) * rad_d + dd::kOpRel * dd::mag(p);
    const dd::DD y = dd::plus_fp(p, ch.beta);
    const double ry = rad_p + dd::kOpRel * dd::mag(y);
    r = ry * (1 + 0x1p-40) + 2 * dd::kOpRel * (dd::mag(y) + ry);
    yh = y.hi;
    yl = y.lo;
  } else {
    r = Ec * (1 + 0x1p-40) + 2 * dd::kOpRel * (dd::mag(c) + Ec);
    yh = c.hi;
    yl = c.lo;
  }
}

// The second tier, for an output the vector pass could not certify (its enclosure, ~2^-40
// relative, straddles a rounding boundary): its exact products and the conv bias summed
// again with TwoSum (Ogita, Rump & Oishi 2005, Sum2). Each step is error-free, so
// S = s + sum e_i exactly; sigma = fl(sum e_i) is within gamma_{n-1} sum|e_i| of sum e_i,
// and E = fl(sum |e_i|) bounds that a posteriori exactly as the kernel's a does
// (fast_conv.hpp). The conv is then two_sum(s, sigma) +- radius, about 2^-100 relative,
// the BatchNorm follows in double-double (enclose_affine) and certify_cell tests each
// format. Writes y[idx] and returns true when every requested format certifies.
bool recheck(const ConvGeometry& g, const std::vector<double>& x, const std::vector<double>& w, const FastLayer& L,
             const std::vector<ChannelAffine>& channels, std::int64_t idx, ValueArray& y) {
  const auto [n, o, oh, ow] = output_index(g, idx);
  const ChannelAffine& ch = channels[static_cast<std::size_t>(o)];
  double sum = 0, sigma = 0, E = 0;
  auto add = [&](double p) {
    const dd::DD t = dd::two_sum(sum, p);
    sum = t.hi;
    sigma += t.lo;
    E += std::fabs(t.lo);
  };
  // Padded positions are exact zero products: skipped (adding 0 changes nothing).
  for_each_window_term(g, n, o, oh, ow, [&](std::size_t xi, std::size_t wi) { add(x[xi] * w[wi]); });  // exact products
  add(ch.bias);
  const double terms = static_cast<double>(g.terms_per_output() + 1), u = 0x1p-53;
  const double gam = terms * u / (1 - terms * u) * (1 + 0x1p-50);
  const double radius_factor = gam / (1 - gam) * (1 + 0x1p-50) * (1 + 0x1p-50);
  double yh, yl, r;
  enclose_affine(dd::two_sum(sum, sigma), E * radius_factor, ch, yh, yl, r);
  std::array<double, kNumFormats> rounded{};
  if (!certify_cells(yh, yl, r, L.formats, rounded)) return false;
  // The array is narrow (binary64 approximations): yh (= fl(yh + yl)) within r + |yl|.
  const std::size_t i = static_cast<std::size_t>(idx);
  y.hi()[i] = yh;
  y.radius()[i] = (r + std::fabs(yl)) * (1 + 0x1p-52);
  for (std::size_t k = 0; k < kNumFormats; ++k)
    if (L.formats & (1u << k)) y.rounded(k)[i] = rounded[k];
  y.certified()[i] = static_cast<std::uint8_t>(L.formats);
  return true;
}

}  // namespace

// v = round(y); the reals that round to v form the open cell between the midpoints with
// v's neighbours, at distances `below` and `above` (half a spacing; half of that toward
// zero from a power of two, where the spacing halves; half the smallest subnormal around
// zero). The interval is certified when it lies strictly inside the cell: d - r > -below
// and d + r < above with d = y - v. yh - v is exact (Sterbenz: v is yh's rounding, within
// a factor of 2, or 0); adding yl rounds once (<= 2^-53 |d|), and the margin 2^-50 (|d| + r)
// on r covers that and the two comparisons' subtractions. Inf and double subnormal
// results are left to the multiprecision path.
bool certify_cell(double yh, double yl, double r, const Format& f, double& out) {
  // For binary32 the hardware conversion of yh serves as v: if the test below passes, y
  // lies in v's cell, so v is y's rounding too (and it fails otherwise).
  const double v = f.precision == kFloat32.precision && f.emin == kFloat32.emin
                       ? static_cast<double>(static_cast<float>(yh))
                       : round_to_format(yh, yl, f);
  if (!std::isfinite(v)) return false;
  double below, above;
  if (v == 0.0) {
    below = above = std::ldexp(1.0, f.emin - f.precision);
  } else {
    const std::uint64_t bits = std::bit_cast<std::uint64_t>(v);
    const int biased = static_cast<int>((bits >> 52) & 0x7ff);
    if (biased == 0) return false;
    const int e = biased - 1023;
    const int q = std::max(e, f.emin) - (f.precision - 1);
    const double half = std::bit_cast<double>(static_cast<std::uint64_t>(q - 1 + 1023) << 52);
    const bool pow2 = (bits & ((std::uint64_t{1} << 52) - 1)) == 0 && e > f.emin;
    const double toward_zero = pow2 ? half / 2 : half;
    below = v > 0 ? toward_zero : half;
    above = v > 0 ? half : toward_zero;
  }
  const double d = (yh - v) + yl;
  const double m = r + 0x1p-50 * (std::fabs(d) + r);
  if (!(d - m > -below && d + m < above)) return false;
  out = v == 0.0 ? 0.0 : v;
  return true;
}


bool certify_cells(double yh, double yl, double r, unsigned formats, std::array<double, kNumFormats>& rounded) {
  for (std::size_t k = 0; k < kNumFormats; ++k)
    if ((formats & (1u << k)) && !certify_cell(yh, yl, r, kFormats[k], rounded[k])) return false;
  return true;
}

// One function on purpose (94 lines, over the harness' 80): the per-thread row loop, its
// barrier and the per-row certification share the panel, the blocked weights and the
// counters; split, they would be passed through five signatures on the hot path.
namespace {

// The panel's row width: the padded row, or the reach of the last tile of kTilePixelsMax
// pixels (its pixels past the row's end read lanes that are never used), plus slack. In
// double: a stride near 2^60 (ONNX bounds strides by int64 only) would wrap in int64 and
// make a huge panel look small.
double panel_width(const ConvGeometry& g) {
  auto d = [](std::int64_t v) { return static_cast<double>(v); };
  const double tiles = std::ceil(d(g.OW()) / d(kTilePixelsMax)) * d(kTilePixelsMax);
  return std::max(d(g.W) + d(g.pad_left) + d(g.pad_right), tiles * d(g.stride_w) + d(g.KW) * d(g.dil_w)) + 8.0;
}

}  // namespace

bool fast_panel_fits(const ConvGeometry& g) {
  return scratch_fits(g, static_cast<double>(g.C) * static_cast<double>(g.KH) * panel_width(g));
}

FastResult fast_conv_bn(const FastLayer& L, FastOut& out) {
  const ConvGeometry& g = *L.g;
  const Kernels& K = kernels();
  const bool bounds = out.conv != nullptr;
  const BlockedWeights bw = block_weights(g, *L.w, bounds, K.blocking);
  const std::int64_t OH = g.OH(), OW = g.OW(), og = g.O / g.groups;
  // Work items: output rows (n, oh), fixed: the result is the same for any thread count.
  const std::int64_t items = g.N * OH;
  const unsigned nt = thread_count(L.threads, static_cast<std::size_t>(items));
  ValueArray& y = *out.y;
  // The sums' radius. With the bound data asked for, the kernel also sums |x w| into a and
  // the radius is radius_factor * a (fast_conv.hpp). Without, the kernel skips that second
  // sum (half its multiply-adds) and the radius comes from sum|x w| <= max_o|w| * sum|x|:
  // sum|x| <= abs_x_factor * ax (ax the computed sum of |x|), so gamma_K * sum|x w| <=
  // gamma * abs_x_factor * wmax_o * ax, where gamma (>= gamma_K) is radius_factor's own
  // factor; the factor 1 + 2^-48 covers the four roundings in forming rf_o and rf_o * ax.
  // The a-priori bound is looser (by max|w| / mean|w|, typically 3 to 4); the outputs it
  // leaves uncertified go to the second tier (recheck), which does not depend on it.
  std::vector<double> rf(static_cast<std::size_t>(g.O), L.radius_factor);
  if (!bounds) {
    const std::int64_t per = g.terms_per_output();
    for (std::int64_t o = 0; o < g.O; ++o) {
      double wmax = 0;
      for (std::int64_t k = 0; k < per; ++k) wmax = std::max(wmax, std::fabs((*L.w)[static_cast<std::size_t>(o * per + k)]));
      rf[static_cast<std::size_t>(o)] = L.gamma * L.abs_x_factor * wmax * (1 + 0x1p-48);
    }
  }
  std::vector<std::vector<std::int64_t>> failed(nt);
  std::vector<std::int64_t> compensated(nt, 0);
  const bool want32 = L.formats & (1u << kF32);
  const bool others = L.formats & ~(1u << kF32);  // float16 or bfloat16 asked for too
  // One parallel region: the channels' data first (thread t: channels t mod nt), then,
  // after every thread has passed the barrier, the rows.
  std::vector<ChannelAffine> channels(static_cast<std::size_t>(g.O));
  std::barrier sync(static_cast<std::ptrdiff_t>(nt));
  auto work = [&](unsigned t) {
    for (std::int64_t o = t; o < g.O; o += nt) channels[static_cast<std::size_t>(o)] = L.channel(o);
    sync.arrive_and_wait();
    // Per thread: the row's sums (a stride of whole tiles, kOBMax spare rows) and its panel,
    // wide enough for every read of the last tile.
    const std::int64_t stride = (OW + kTilePixelsMax - 1) / kTilePixelsMax * kTilePixelsMax;
    const auto panel_w = static_cast<std::int64_t>(panel_width(g));  // small: fast_panel_fits
    std::vector<double> s(static_cast<std::size_t>((g.O + kOBMax) * stride)), a(s.size()),
        ax(static_cast<std::size_t>(g.groups * stride)), panel(static_cast<std::size_t>(g.C * g.KH * panel_w));
    // ok flags of the row's outputs ([o][ow]), and their float32 roundings when float32 is
    // not asked for (the cell test runs anyway; its result is then unused).
    std::vector<std::uint8_t> ok(static_cast<std::size_t>(g.O * OW));
    std::vector<double> scratch(want32 ? 0 : static_cast<std::size_t>(g.O * OW));
    const RowSumsArgs ra{g.C, g.KH, g.KW, g.stride_w, g.dil_w, g.groups, og, OW, panel.data(), panel_w,
                         g.KH * panel_w, bw.w.data(), bw.wabs.data(), bw.group_stride, bw.kOB,
                         bw.blocks_per_group, bounds, s.data(), a.data(), ax.data(), stride};
    for (std::int64_t it = t; it < items; it += nt) {
      const std::int64_t n = it / OH, oh = it % OH;
      fill_panel(g, *L.x, n, oh, panel_w, panel.data());
      K.row_sums(ra);
      const std::size_t b0 = static_cast<std::size_t>((n * g.O * OH + oh) * OW);  // channel 0's row
      const FinishArgs fa{s.data(), a.data(), ax.data(), stride, og, g.O, OW, OH * OW, channels.data(), rf.data(),
                          bounds, want32, L.abs_factor, L.abs_x_factor, y.hi() + b0, y.radius() + b0,
                          want32 ? y.rounded(kF32) + b0 : scratch.data(), want32 ? OH * OW : OW, ok.data(),
                          static_cast<std::uint8_t>(L.formats), y.certified() + b0,
                          bounds ? out.conv + b0 : nullptr, bounds ? out.conv_radius + b0 : nullptr,
                          bounds ? out.abs_sum + b0 : nullptr, bounds ? out.abs_x_sum + b0 : nullptr};
      if (K.finish_row(fa) == 0 && !others) continue;
      for (std::int64_t o = 0; o < g.O; ++o) {
        const std::size_t b = b0 + static_cast<std::size_t>(o * OH * OW);
        std::uint8_t* okr = &ok[static_cast<std::size_t>(o * OW)];
        if (others) {
          // Float16, bfloat16: the general cell test, one output at a time.
          for (std::size_t k = 0; k < kNumFormats; ++k) {
            if (k == kF32 || !(L.formats & (1u << k))) continue;
            double* rk = y.rounded(k) + b;
            for (std::int64_t i = 0; i < OW; ++i)
              if (okr[i] && !certify_cell(y.hi()[b + i], 0.0, y.radius()[b + i], kFormats[k], rk[i])) {
                okr[i] = 0;
                y.certified()[b + i] = 0;
              }
          }
        }
        for (std::int64_t i = 0; i < OW; ++i)
          if (!okr[i]) {
            if (recheck(g, *L.x, *L.w, L, channels, static_cast<std::int64_t>(b) + i, y)) ++compensated[t];
            else failed[t].push_back(static_cast<std::int64_t>(b) + i);
          }
      }
    }
  };
  parallel(nt, work);
  FastResult res;
  for (auto& f : failed) res.uncertified.insert(res.uncertified.end(), f.begin(), f.end());
  std::sort(res.uncertified.begin(), res.uncertified.end());
  for (const std::int64_t c : compensated) res.compensated += c;
  return res;
}

}  // namespace foldcheck::ref::detail
