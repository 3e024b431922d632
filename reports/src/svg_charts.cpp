// Inline SVG charts (svg_charts.hpp).
#include "svg_charts.hpp"

#include "foldcheck/reports/neutralise.hpp"
#include "foldcheck/reports/utf8.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include <fmt/format.h>

namespace foldcheck::reports::svg {

using CompactHistogram = result::views::CompactHistogram;

namespace {

// Markup characters as entities, U+FFFE/U+FFFF as U+FFFD, a line feed (only a neutralised page
// holds one) as &#10;; `s` is neutralised text: no other control character, every byte UTF-8.
std::string xml_escaped(const std::string& s) {
  std::string r;
  for (std::size_t i = 0; i < s.size();) {
    const char c = s[i];
    switch (c) {
      case '&': r += "&amp;"; break;
      case '<': r += "&lt;"; break;
      case '>': r += "&gt;"; break;
      case '"': r += "&quot;"; break;
      case '\'': r += "&#39;"; break;
      case '\n': r += "&#10;"; break;
      default: {
        const std::size_t n = std::max<std::size_t>(utf8_length(s, i), 1);
        if (utf8_noncharacter(s, i, n)) r += "\xEF\xBF\xBD";  // U+FFFE, U+FFFF: not XML characters
        else r.append(s, i, n);
        i += n;
        continue;
      }
    }
    ++i;
  }
  return r;
}

}  // namespace

std::string escape(const std::string& text) { return xml_escaped(neutralised(text)); }

std::string escape_lines(const std::string& text) { return xml_escaped(neutralised_page(text)); }

const char* verdict_colour(Verdict v) {
  switch (v) {
    case Verdict::Expected: return "#2e7d32";
    case Verdict::Suspicious: return "#ef8f00";
    case Verdict::Unexpected: return "#c62828";
    case Verdict::Mistrusted: break;
  }
  return "#757575";
}

namespace {

std::string power_label(double upper) {
  const int e = static_cast<int>(std::lround(std::log2(upper)));
  return e == 0 ? "1" : fmt::format("2^{}", e);
}

struct Bin {
  double upper;  // <= 0: the overflow bin
  std::int64_t neg, pos;
};

// The histogram's doubling bins (none without a numeric first_upper).
std::vector<Bin> doubling_bins(const CompactHistogram& hist) {
  std::vector<Bin> bins;
  if (hist.first_upper) {
    double upper = *hist.first_upper;
    const auto& neg = hist.negative;
    const auto& pos = hist.positive;
    // at(), not operator[]: a hand-edited or truncated report may have sides of different
    // lengths (found by fuzz_report_json; fuzz/regressions/fuzz_report_json/). A mismatch
    // throws: bad input.
    for (std::size_t i = 0; i < neg.size(); ++i, upper *= 2) bins.push_back({upper, neg.at(i), pos.at(i)});
  }
  return bins;
}

// Extend with empty bins (each twice the last) until the bound falls inside the axis, then
// add the overflow bin if it has counts.
void extend_bins(std::vector<Bin>& bins, const CompactHistogram& hist, double bound) {
  if (bound > 0 && !bins.empty())
    while (bins.back().upper < bound && bins.size() < 48) bins.push_back({bins.back().upper * 2, 0, 0});
  if (hist.overflow_negative + hist.overflow_positive > 0)
    bins.push_back({-1.0, hist.overflow_negative, hist.overflow_positive});
}

// The chart's layout: 2n + 1 slots (negative bins mirrored, zero, positive bins), counts on a log scale.
struct Layout {
  static constexpr double W = 560, H = 190, left = 36, right = 12, top = 26, bottom = 40;
  std::size_t n;  // bins per side
  double pw, ph, sw, lmax;  // plot width and height, slot width, log10(1 + max count)
  Layout(std::size_t bins, std::int64_t maxc)
      : n(bins), pw(W - left - right), ph(H - top - bottom), sw(pw / static_cast<double>(2 * n + 1)),
        lmax(std::log10(1.0 + static_cast<double>(std::max<std::int64_t>(maxc, 1)))) {}
  double height(std::int64_t c) const { return c > 0 ? ph * std::log10(1.0 + static_cast<double>(c)) / lmax : 0.0; }
  double slot_x(std::size_t slot) const { return left + sw * static_cast<double>(slot); }
};

// The svg element's opening, the title, the x axis and the y axis' log-scale count lines.
std::string frame(const Layout& l, std::int64_t maxc, const std::string& title) {
  const double W = Layout::W, H = Layout::H, left = Layout::left, right = Layout::right, top = Layout::top, ph = l.ph;
  std::string s = fmt::format(
      "<svg class=\"hist\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{:.0f}\" height=\"{:.0f}\" viewBox=\"0 0 {:.0f} {:.0f}\" "
      "role=\"img\"><title>{}</title>",
      W, H, W, H, escape(title));
  s += fmt::format("<text x=\"{:.0f}\" y=\"16\" class=\"t\">{}</text>", left, escape(title));
  s += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#999\"/>", left, top + ph, W - right,
                   top + ph);
  // y axis: counts 1, 10, 100, ... on the log scale
  for (double c = 1; c <= static_cast<double>(maxc); c *= 10) {
    const double y = top + ph - l.height(static_cast<std::int64_t>(c));
    s += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#eee\"/>", left, y, W - right, y);
    s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" class=\"a\" text-anchor=\"end\">{:g}</text>", left - 3, y + 3, c);
  }
  return s;
}

// The bars: negative bins mirrored left of the zero bar, positive ones to its right; a bin
// wholly beyond `bound` (> 0) in red, so errors past their bound stand out on a ratio chart.
std::string bars(const Layout& l, const std::vector<Bin>& bins, std::int64_t zero, const CompactHistogram& hist,
                 double bound) {
  std::string s;
  const std::size_t n = l.n;
  auto bar = [&](std::size_t slot, std::int64_t c, const char* fill, const std::string& tip) {
    if (c <= 0) return;
    const double h = l.height(c);
    s += fmt::format("<rect class=\"bar\" x=\"{:.2f}\" y=\"{:.2f}\" width=\"{:.2f}\" height=\"{:.2f}\" fill=\"{}\"><title>{}: {}</title></rect>",
                     l.slot_x(slot) + 0.5, Layout::top + l.ph - h, std::max(l.sw - 1.0, 0.5), h, fill, escape(tip), c);
  };
  auto range = [&](std::size_t i) {
    if (bins[i].upper <= 0) return std::string("overflow");
    if (i == 0 && hist.from_zero) return fmt::format("(0, {:g}]", bins[i].upper);
    return fmt::format("({:g}, {:g}]", bins[i].upper / 2, bins[i].upper);
  };
  for (std::size_t i = 0; i < n; ++i) {
    const double lower = bins[i].upper <= 0 ? HUGE_VAL : i == 0 && hist.from_zero ? 0.0 : bins[i].upper / 2;
    const bool beyond = bound > 0 && lower >= bound;
    bar(n - 1 - i, bins[i].neg, beyond ? "#c62828" : "#5c6bc0", "negative " + range(i));
    bar(n + 1 + i, bins[i].pos, beyond ? "#c62828" : "#26a69a", "positive " + range(i));
  }
  bar(n, zero, "#9e9e9e", "exactly 0");
  return s;
}

// x labels: every few bins, both sides; 0; the axis title with the unit.
std::string x_labels(const Layout& l, const std::vector<Bin>& bins, const CompactHistogram& hist) {
  std::string s;
  const std::size_t n = l.n;
  const double top = Layout::top, ph = l.ph, sw = l.sw;
  const std::size_t step = std::max<std::size_t>(1, n / 5);
  for (std::size_t i = step - 1; i < n; i += step) {
    if (bins[i].upper <= 0) continue;
    for (const std::size_t slot : {n - 1 - i, n + 1 + i})
      s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" class=\"a\" text-anchor=\"middle\">{}{}</text>", l.slot_x(slot) + sw / 2,
                       top + ph + 12, slot < n ? "-" : "", power_label(bins[i].upper));
  }
  s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" class=\"a\" text-anchor=\"middle\">0</text>", l.slot_x(n) + sw / 2, top + ph + 12);
  const std::string& unit = hist.unit;
  s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" class=\"a\" text-anchor=\"middle\">{} (log2 bins; counts log scale)</text>",
                   Layout::left + l.pw / 2, Layout::H - 6, unit == "bound" ? "error / its bound" : "error (" + escape(unit) + ")");
  return s;
}

// The bound: dashed lines at -bound and +bound, each at its position inside its bin
// (log2-interpolated), and its label.
std::string bound_lines(const Layout& l, const std::vector<Bin>& bins, double bound, const std::string& bound_label) {
  std::string s;
  const std::size_t n = l.n;
  const double top = Layout::top, sw = l.sw;
  double pos = -1;
  for (std::size_t i = 0; i < n && pos < 0; ++i) {
    if (bins[i].upper <= 0 || bound > bins[i].upper) continue;
    const double lower = i == 0 ? bins[i].upper / 2 : bins[i - 1].upper;
    pos = static_cast<double>(i) + std::clamp(std::log2(bound / lower), 0.0, 1.0);
  }
  if (pos < 0) pos = static_cast<double>(n);
  for (const double x : {l.slot_x(n + 1) + sw * pos, l.slot_x(n) - sw * pos})
    s += fmt::format("<line class=\"bound\" x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#c62828\" "
                     "stroke-dasharray=\"4 3\"/>",
                     x, top - 4, x, top + l.ph);
  s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" class=\"a\" text-anchor=\"end\" fill=\"#c62828\">{}</text>",
                   Layout::W - Layout::right, top - 6, escape(bound_label));
  return s;
}

}  // namespace

std::string signed_histogram(const std::optional<CompactHistogram>& histogram, double bound,
                             const std::string& bound_label, const std::string& title) {
  if (!histogram) return "";
  const CompactHistogram& hist = *histogram;
  std::vector<Bin> bins = doubling_bins(hist);
  const std::int64_t zero = hist.zero;
  extend_bins(bins, hist, bound);
  std::int64_t maxc = zero;
  for (const Bin& b : bins) maxc = std::max({maxc, b.neg, b.pos});
  const Layout l(bins.size(), maxc);
  std::string s = frame(l, maxc, title);
  s += bars(l, bins, zero, hist, bound);
  s += x_labels(l, bins, hist);
  if (bound > 0 && l.n > 0) s += bound_lines(l, bins, bound, bound_label);
  return s + "</svg>";
}

std::string stage_bars(const std::map<std::string, double>& shares, const std::string& title) {
  static const std::map<std::string, const char*> colours{{"accumulation", "#1e88e5"}, {"weight", "#8e24aa"},
                                                           {"bias", "#f4511e"},         {"rsqrt", "#fdd835"},
                                                           {"scale", "#43a047"},        {"var_eps", "#6d4c41"},
                                                           {"output", "#00acc1"}};
  const double W = 560, H = 58, left = 8, bw = W - 16;
  std::string s = fmt::format(
      "<svg class=\"stages\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{:.0f}\" height=\"{:.0f}\" viewBox=\"0 0 {:.0f} {:.0f}\" "
      "role=\"img\"><title>{}</title><text x=\"{:.0f}\" y=\"12\" class=\"t\">{}</text>",
      W, H, W, H, escape(title), left, escape(title));
  double total = 0;
  for (const auto& [k, v] : shares) total += std::max(v, 0.0);
  double x = left, lx = left;
  for (const auto& [k, v] : shares) {
    const double w = total > 0 ? bw * std::max(v, 0.0) / total : 0;
    const auto it = colours.find(k);
    const char* fill = it == colours.end() ? "#90a4ae" : it->second;
    if (w > 0)
      s += fmt::format("<rect class=\"bar\" x=\"{:.2f}\" y=\"18\" width=\"{:.2f}\" height=\"16\" fill=\"{}\"><title>{}: {:.1f}%</title></rect>",
                       x, w, fill, escape(k), 100 * v);
    x += w;
    if (v >= 0.005) {
      s += fmt::format("<rect x=\"{:.1f}\" y=\"42\" width=\"9\" height=\"9\" fill=\"{}\"/><text x=\"{:.1f}\" y=\"50\" class=\"a\">{} {:.0f}%</text>",
                       lx, fill, lx + 12, escape(k), 100 * v);
      lx += 24 + 6.2 * static_cast<double>(k.size()) + 28;
    }
  }
  return s + "</svg>";
}

std::string layer_chart(const std::vector<LayerValue>& layers, const std::string& title, const std::string& unit) {
  const double W = std::max(560.0, 22.0 * static_cast<double>(layers.size()) + 60), H = 220, left = 44, right = 10, top = 24,
               bottom = 70;
  const double pw = W - left - right, ph = H - top - bottom;
  double vmax = 1;
  for (const LayerValue& l : layers) vmax = std::max(vmax, l.value);
  const double dmax = std::ceil(std::log10(vmax + 1) + 1e-9);
  auto height = [&](double v) { return ph * std::log10(1 + std::max(v, 0.0)) / std::max(dmax, 1.0); };
  std::string s = fmt::format(
      "<svg class=\"layers\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{:.0f}\" height=\"{:.0f}\" viewBox=\"0 0 {:.0f} {:.0f}\" "
      "role=\"img\"><title>{}</title><text x=\"{:.0f}\" y=\"15\" class=\"t\">{}</text>",
      W, H, W, H, escape(title), left, escape(title));
  for (int d = 0; d <= static_cast<int>(dmax); ++d) {
    const double v = std::pow(10.0, d) - 1, y = top + ph - height(v);
    s += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#eee\"/><text x=\"{:.1f}\" y=\"{:.1f}\" "
                     "class=\"a\" text-anchor=\"end\">{:g}</text>",
                     left, y, W - right, y, left - 3, y + 3, std::pow(10.0, d));
  }
  const double bw = layers.empty() ? 0 : pw / static_cast<double>(layers.size());
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const LayerValue& l = layers[i];
    const double h = height(l.value), x = left + bw * static_cast<double>(i);
    s += fmt::format(
        "<rect class=\"bar\" x=\"{:.2f}\" y=\"{:.2f}\" width=\"{:.2f}\" height=\"{:.2f}\" fill=\"{}\"><title>{}: "
        "{:.4g} {} ({})</title></rect>",
        x + 1, top + ph - h, std::max(bw - 2, 1.0), h, verdict_colour(l.verdict), escape(l.name), l.value, escape(unit),
        name(l.verdict));
    std::string label = l.name.size() > 14 ? "…" + l.name.substr(l.name.size() - 13) : l.name;
    s += fmt::format("<text class=\"a\" transform=\"translate({:.1f},{:.1f}) rotate(-60)\" text-anchor=\"end\">{}</text>",
                     x + bw / 2 + 3, top + ph + 6, escape(label));
  }
  return s + "</svg>";
}

}  // namespace foldcheck::reports::svg
