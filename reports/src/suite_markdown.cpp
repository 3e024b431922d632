// Markdown summary of a suite report (suite_reports.hpp).
#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "identical_rows.hpp"
#include "markdown_cell.hpp"

#include "foldcheck/reports/compare_reports.hpp"
#include "foldcheck/reports/neutralise.hpp"
#include "foldcheck/reports/row_notes.hpp"
#include "foldcheck/reports/run_answer.hpp"
#include "foldcheck/reports/suite_reports.hpp"
#include "foldcheck/reports/summary.hpp"

namespace foldcheck::reports {

using json = nlohmann::json;
namespace views = result::views;

namespace {

std::string num(const std::optional<double>& v) { return v ? fmt::format("{:.3g}", *v) : std::string("–"); }

std::string cell(const std::string& s) { return markdown_cell(s); }

std::optional<double> ulp_of(const views::PathSummary& p, std::optional<double> views::Stats::*stat) {
  return p.ulp ? (*p.ulp).*stat : std::nullopt;
}

// An entry's answer (run results): the verdict's reason, the observed weights, the tolerances.
std::string answer_markdown(const views::Summary& summary) {
  if (!summary.answer) return "";  // a report written before answers existed
  const AnswerLines a = answer_lines(*summary.answer);
  std::string s = "**" + cell(a.headline) + "**\n\n";
  if (!a.observed.empty()) s += cell(a.observed) + "\n\n";
  for (const std::string& m : a.more) s += cell(m) + "\n\n";
  if (!a.tolerances.empty()) {
    s += "assert_close tolerances implied by the bound:\n";
    for (const std::string& t : a.tolerances) s += "- " + cell(t) + "\n";
    s += "\n";
  }
  return s;
}

// A row's footnote marks: each note but the cancellation's, numbered once in `notes`.
std::string note_marks(const views::PathSummary& p, std::vector<std::string>& notes) {
  std::string marks;
  const std::string cancelled = cancellation_note(p.note_facts());
  for (const std::string& n : p.note_list()) {
    if (n == cancelled) continue;
    auto it = std::find(notes.begin(), notes.end(), n);
    if (it == notes.end()) it = notes.insert(notes.end(), n);
    marks += fmt::format(" [{}]", it - notes.begin() + 1);
  }
  return marks;
}

// A run's output paths under a fold: the ratio to the bound first, rows identical but for
// their order, arithmetic and path shown once; a cancelled result's row marked † with the
// explanation once, every other note (row_notes.hpp) once as a numbered footnote.
std::string paths_markdown(const std::vector<views::PathSummary>& paths) {
  std::vector<std::string> keys;
  std::vector<std::vector<std::string>> labels;
  for (const views::PathSummary& p : paths) {
    labels.push_back({p.accumulation + (p.arithmetic == "default" ? "" : " " + p.arithmetic) + " " + p.path});
    keys.push_back(fmt::format("| {} | {} | {} | {}{} | {} |", cell(p.dtype), name(p.verdict), num(p.bound_ratio),
                               num(ulp_of(p, &views::Stats::max_abs)), shows_cancellation(p.note_facts()) ? " †" : "",
                               num(ulp_of(p, &views::Stats::p99_9))) +
                   "\x1f" + json(p.note_list()).dump());
  }
  std::string t = "| path | dtype | verdict | worst ratio to bound | max \\|ULP\\| | p99.9 \\|ULP\\| |\n|---|---|---|---:|---:|---:|\n";
  std::vector<std::string> notes;  // footnote n is notes[n - 1]
  bool cancelled = false;
  for (const auto& g : identical_groups(keys)) {
    const auto names = distinct_column(labels, g, 0);
    const std::string all = joined_column(labels, g, 0);
    const std::string label = names.size() > 2 ? fmt::format("{} paths, identical ({})", names.size(), all) : all;
    cancelled = cancelled || shows_cancellation(paths[g[0]].note_facts());
    const std::string marks = note_marks(paths[g[0]], notes);
    t += "| " + cell(label) + marks + " " + keys[g[0]].substr(0, keys[g[0]].find('\x1f')) + "\n";
  }
  std::string foot = cancelled ? "\n† " + cell(kCancellationNote) + "\n" : "";
  for (std::size_t i = 0; i < notes.size(); ++i) foot += fmt::format("\n[{}] {}\n", i + 1, cell(notes[i]));
  return "<details><summary>Every output path: worst |error| / its bound (&gt; 1: beyond)</summary>\n\n" + t + foot +
         "\n</details>\n\n";
}

// One `run` or `accuracy-diff` result: its verdict and answer, the description, the worst
// bound ratio; no suite wording.
std::string single_markdown(const views::Report& r) {
  if (r.entries.empty()) throw std::invalid_argument("a single result's report has no entry");
  const views::ReportEntry& x = r.entries.front();
  const views::Summary& s = x.summary;
  const Headline h = headline(s);
  std::string out = fmt::format("## foldcheck {} {}: {} {}\n\n", cell(r.suite.single_command.value_or("")),
                                cell(x.name), s.verdict == Verdict::Expected ? "✅" : "❌", name(s.verdict));
  out += answer_markdown(s);
  if (!s.description.empty()) out += cell(s.description) + "\n\n";
  if (s.is_run() && !s.paths.empty()) out += paths_markdown(s.paths);
  if (!s.is_run() && !h.worst_where.empty())  // a run's answer has said it
    out += fmt::format("Worst ratio to its rounding-error bound: {} ({}; > 1: beyond the bound).\n", num(h.worst_ratio),
                       cell(h.worst_where));
  for (const std::string& w : h.not_expected) out += "- not EXPECTED: " + cell(w) + "\n";
  return out;
}

// The table of entries: passed, verdict, expected, the headline's worst ratio and p99.9.
std::string entries_table(const views::Report& r) {
  std::string s =
      "| entry | kind | verdict | expected | worst bound ratio | max p99.9 \\|ULP\\| |\n|---|---|---|---|---:|---:|\n";
  for (const views::ReportEntry& x : r.entries) {
    const Headline h = headline(x.summary);
    s += fmt::format("| {} {} | {} | {} | {} | {} | {} |\n", x.passed.value_or(false) ? "✅" : "❌", cell(x.name), x.kind,
                     name(x.summary.verdict), name(x.expect), num(h.worst_ratio),
                     num(h.max_p99_9_ulp) + (h.max_p99_9_ulp_cancelled ? " †" : ""));
  }
  return s;
}

// A failed entry: its verdict against the expected one, where it is worst, what is not
// EXPECTED (the first 8), and its answer's first reason.
std::string failed_entry(const views::ReportEntry& x) {
  const Headline h = headline(x.summary);
  std::string s = fmt::format("\n- **{}**: verdict {} (expected {}); worst bound ratio {} at {}", cell(x.name),
                              name(x.summary.verdict), name(x.expect), num(h.worst_ratio), cell(h.worst_where));
  if (!h.not_expected.empty()) {
    s += "; not EXPECTED:";
    std::size_t k = 0;
    for (const std::string& w : h.not_expected) {
      if (k++ == 8) {
        s += fmt::format(" … ({} in all)", h.not_expected.size());
        break;
      }
      s += ' ';
      s += cell(w);
    }
  }
  s += "\n";
  if (x.summary.answer && !x.summary.answer->reasoning.empty()) s += "  " + cell(x.summary.answer->reasoning[0]) + "\n";
  return s;
}

std::string markdown_page(const views::Report& r) {
  if (r.suite.single_command) return single_markdown(r);
  std::int64_t passed = 0;
  for (const views::ReportEntry& x : r.entries) passed += x.passed.value_or(false);
  const bool ok = passed == static_cast<std::int64_t>(r.entries.size()) && !r.entries.empty();
  std::string s = fmt::format("## foldcheck suite {}: {} {}/{} passed\n\n", cell(r.suite.name), ok ? "✅" : "❌", passed,
                              r.entries.size());
  if (!r.suite.description.empty()) s += cell(r.suite.description) + "\n\n";
  if (r.suite.shard_count && *r.suite.shard_count > 1)
    s += fmt::format("Shards {} of {}.\n\n", r.suite.shards.dump(), *r.suite.shard_count);
  s += entries_table(r);
  bool any = false;
  for (const views::ReportEntry& x : r.entries) {
    if (x.passed.value_or(false)) continue;
    if (!any) s += "\n### Failed entries\n";
    any = true;
    s += failed_entry(x);
  }
  s += "\nRatios are the worst |error| / its rounding-error bound (> 1: beyond the bound). " + std::string(kP999Note) +
       " Full results: `results/` beside report.json.\n";
  return s;
}

}  // namespace

// Names are neutralised where they are written (escape, markdown_cell); the whole page again, so
// that no string a writer did not escape can drive a terminal or reorder what follows it (neutralise.hpp).
std::string report_markdown(const views::Report& r) { return neutralised_page(markdown_page(r)); }

std::string report_markdown(const json& report) { return report_markdown(report_of(neutralised_strings(report))); }

}  // namespace foldcheck::reports
