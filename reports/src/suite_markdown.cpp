// Markdown summary of a suite report (suite_reports.hpp).
#include <algorithm>

#include <fmt/format.h>

#include "identical_rows.hpp"
#include "markdown_cell.hpp"

#include "foldcheck/reports/compare_reports.hpp"
#include "foldcheck/reports/row_notes.hpp"
#include "foldcheck/reports/run_answer.hpp"
#include "foldcheck/reports/suite_reports.hpp"
#include "foldcheck/reports/summary.hpp"

namespace foldcheck::reports {

using json = nlohmann::json;

namespace {

std::string num(const json& v) { return v.is_number() ? fmt::format("{:.3g}", v.get<double>()) : std::string("–"); }

std::string cell(const std::string& s) { return markdown_cell(s); }

// An entry's answer (run results): the verdict's reason, the observed weights, the tolerances.
std::string answer_markdown(const json& summary) {
  if (!summary.contains("answer")) return "";  // a report written before answers existed
  const AnswerLines a = answer_lines(summary["answer"]);
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

// A run's output paths under a fold: the ratio to the bound first, rows identical but for
// their order, arithmetic and path shown once; a cancelled result's row marked † with the
// explanation once, every other note (row_notes.hpp) once as a numbered footnote.
std::string paths_markdown(const json& paths) {
  std::vector<std::string> keys;
  std::vector<std::vector<std::string>> labels;
  for (const json& p : paths) {
    const std::string ar = p["arithmetic"];
    labels.push_back({p["accumulation"].get<std::string>() + (ar == "default" ? "" : " " + ar) + " " +
                      p["path"].get<std::string>()});
    keys.push_back(fmt::format("| {} | {} | {} | {}{} | {} |", cell(p["dtype"]), p["verdict"].get<std::string>(),
                               num(p.value("bound_ratio", json())), num(p["ulp"]["max_abs"]),
                               shows_cancellation(p) ? " †" : "", num(p["ulp"]["p99_9"])) +
                   "\x1f" + p.value("notes", json::array()).dump());
  }
  std::string t = "| path | dtype | verdict | worst ratio to bound | max \\|ULP\\| | p99.9 \\|ULP\\| |\n|---|---|---|---:|---:|---:|\n";
  std::vector<std::string> notes;  // footnote n is notes[n - 1]
  bool cancelled = false;
  for (const auto& g : identical_groups(keys)) {
    const json& p = paths[g[0]];
    const auto names = distinct_column(labels, g, 0);
    const std::string all = joined_column(labels, g, 0);
    std::string marks;
    const std::string label = names.size() > 2 ? fmt::format("{} paths, identical ({})", names.size(), all) : all;
    cancelled = cancelled || shows_cancellation(p);
    for (const json& x : p.value("notes", json::array())) {
      const std::string n = x.get<std::string>();
      if (n == cancellation_note(p)) continue;
      auto it = std::find(notes.begin(), notes.end(), n);
      if (it == notes.end()) it = notes.insert(notes.end(), n);
      marks += fmt::format(" [{}]", it - notes.begin() + 1);
    }
    t += "| " + cell(label) + marks + " " + keys[g[0]].substr(0, keys[g[0]].find('\x1f')) + "\n";
  }
  std::string foot = cancelled ? "\n† " + cell(kCancellationNote) + "\n" : "";
  for (std::size_t i = 0; i < notes.size(); ++i) foot += fmt::format("\n[{}] {}\n", i + 1, cell(notes[i]));
  return "<details><summary>Every output path: worst |error| / its bound (&gt; 1: beyond)</summary>\n\n" + t + foot +
         "\n</details>\n\n";
}

// One `run` or `accuracy-diff` result: its verdict and answer, the description, the worst
// bound ratio; no suite wording.
std::string single_markdown(const json& r) {
  const json& x = r["entries"][0];
  const json& s = x["summary"];
  const json h = headline(s);
  std::string out = fmt::format("## foldcheck {} {}: {} {}\n\n", cell(r["suite"]["single_command"]), cell(x["name"]),
                                s["verdict"] == "EXPECTED" ? "✅" : "❌", s["verdict"].get<std::string>());
  out += answer_markdown(s);
  const std::string desc = s.value("description", "");
  if (!desc.empty()) out += cell(desc) + "\n\n";
  if (s["command"] == "run" && !s.value("paths", json::array()).empty()) out += paths_markdown(s["paths"]);
  if (s["command"] != "run" && !h["worst_where"].get<std::string>().empty())  // a run's answer has said it
    out += fmt::format("Worst ratio to its rounding-error bound: {} ({}; > 1: beyond the bound).\n", num(h["worst_ratio"]),
                       cell(h["worst_where"]));
  for (const json& w : h["not_expected"]) out += "- not EXPECTED: " + cell(w) + "\n";
  return out;
}

}  // namespace

std::string report_markdown(const json& in) {
  const json r = as_report(in);
  if (r["suite"].contains("single_command")) return single_markdown(r);
  const json& e = r["entries"];
  std::int64_t passed = 0;
  for (const json& x : e) passed += x.value("passed", false);
  const bool ok = passed == static_cast<std::int64_t>(e.size()) && !e.empty();
  std::string s = fmt::format("## foldcheck suite {}: {} {}/{} passed\n\n", cell(r["suite"]["name"].get<std::string>()),
                              ok ? "✅" : "❌", passed, e.size());
  const std::string desc = r["suite"].value("description", "");
  if (!desc.empty()) s += cell(desc) + "\n\n";
  if (r["suite"].contains("shard_count") && r["suite"]["shard_count"].get<unsigned>() > 1)
    s += fmt::format("Shards {} of {}.\n\n", r["suite"]["shards"].dump(), r["suite"]["shard_count"].get<unsigned>());
  s += "| entry | kind | verdict | expected | worst bound ratio | max p99.9 \\|ULP\\| |\n|---|---|---|---|---:|---:|\n";
  for (const json& x : e) {
    const json h = headline(x["summary"]);
    s += fmt::format("| {} {} | {} | {} | {} | {} | {} |\n", x.value("passed", false) ? "✅" : "❌", cell(x["name"]),
                     x["kind"].get<std::string>(), x["summary"]["verdict"].get<std::string>(), x["expect"].get<std::string>(),
                     num(h["worst_ratio"]), num(h["max_p99_9_ulp"]) + (h["max_p99_9_ulp_cancelled"] == true ? " †" : ""));
  }
  bool any = false;
  for (const json& x : e) {
    if (x.value("passed", false)) continue;
    if (!any) s += "\n### Failed entries\n";
    any = true;
    const json h = headline(x["summary"]);
    s += fmt::format("\n- **{}**: verdict {} (expected {}); worst bound ratio {} at {}", cell(x["name"]),
                     x["summary"]["verdict"].get<std::string>(), x["expect"].get<std::string>(), num(h["worst_ratio"]),
                     cell(h["worst_where"]));
    if (!h["not_expected"].empty()) {
      s += "; not EXPECTED:";
      std::size_t k = 0;
      for (const json& w : h["not_expected"]) {
        if (k++ == 8) {
          s += fmt::format(" … ({} in all)", h["not_expected"].size());
          break;
        }
        s += ' ';
        s += cell(w);
      }
    }
    s += "\n";
    const json why = x["summary"].contains("answer") ? x["summary"]["answer"]["reasoning"] : json::array();
    if (!why.empty()) s += "  " + cell(why[0]) + "\n";
  }
  s += "\nRatios are the worst |error| / its rounding-error bound (> 1: beyond the bound). " + std::string(kP999Note) +
       " Full results: `results/` beside report.json.\n";
  return s;
}

}  // namespace foldcheck::reports
