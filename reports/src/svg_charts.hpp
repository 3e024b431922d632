#pragma once
// Inline SVG charts for the HTML report (no scripts, no network). Every data bar is a
// <rect class="bar">, so a browser test can count what was drawn. Internal to reports.
#include <map>
#include <string>

#include <optional>
#include <vector>

#include "foldcheck/result/views/summary.hpp"

namespace foldcheck::reports::svg {

// A signed log2 histogram (a summary's compact form, summary.hpp: the first bin's upper
// edge, negative and positive counts per doubling bin, exact zeros, overflow): negative errors mirrored to the left of
// zero, positive to the right, bar heights on a log scale of the count. `bound` (same unit, > 0) draws dashed lines at
// -bound and +bound, `bound_label` naming them, and bins wholly beyond it in red. No histogram (the summary had none of
// that name): no chart.
std::string signed_histogram(const std::optional<result::views::CompactHistogram>& hist, double bound,
                             const std::string& bound_label, const std::string& title);

// One horizontal bar split by stage shares (stage -> share in [0, 1]) with a legend.
std::string stage_bars(const std::map<std::string, double>& shares, const std::string& title);

// Per-layer values (name, value >= 0, verdict) as vertical bars on a log10 axis.
struct LayerValue {
  std::string name;
  double value = 0;
  Verdict verdict = Verdict::Expected;
};
std::string layer_chart(const std::vector<LayerValue>& layers, const std::string& title, const std::string& unit);

// A colour for a verdict (EXPECTED green, SUSPICIOUS amber, UNEXPECTED red, MISTRUSTED grey).
const char* verdict_colour(Verdict verdict);

// Text escaped for HTML/XML content and attributes: control characters, line breaks and bidi
// controls shown as \n, \t, \uXXXX (neutralise.hpp, the one rule for names), markup characters
// as entities, U+FFFE and U+FFFF (which XML 1.0 cannot hold) as U+FFFD. The result is
// well-formed in content and in attributes.
std::string escape(const std::string& text);
// The same for a text of several lines that foldcheck wrote (a JUnit failure's detail, whose
// names were neutralised in the report before it was written): its own line feeds kept, as
// &#10; (a line feed in content and in attributes alike), every other control escaped.
std::string escape_lines(const std::string& text);

}  // namespace foldcheck::reports::svg
