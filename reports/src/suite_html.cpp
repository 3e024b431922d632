// The self-contained HTML report (suite_reports.hpp).
#include <algorithm>
#include <set>
#include <stdexcept>

#include <fmt/format.h>

#include "foldcheck/reports/compare_reports.hpp"
#include "foldcheck/reports/neutralise.hpp"
#include "foldcheck/reports/row_notes.hpp"
#include "foldcheck/reports/run_answer.hpp"
#include "foldcheck/reports/suite_reports.hpp"
#include "foldcheck/reports/summary.hpp"
#include "identical_rows.hpp"
#include "svg_charts.hpp"

#include "foldcheck/result/views/json_io.hpp"

namespace foldcheck::reports {

using json = nlohmann::json;
namespace views = result::views;
using result::views::CompactHistogram;
using svg::escape;

namespace {

constexpr const char* kStyle = R"(
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px auto;max-width:1240px;color:#212121;padding:0 16px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:18px;margin:28px 0 6px;border-bottom:1px solid #ddd;padding-bottom:4px}
h4{font-size:13px;margin:0 0 4px;font-weight:600}
table{border-collapse:collapse;margin:8px 0;font-size:13px}th,td{border:1px solid #e0e0e0;padding:3px 8px;text-align:left}
td.n{text-align:right;font-variant-numeric:tabular-nums}th{background:#fafafa}
.badge{display:inline-block;color:#fff;border-radius:3px;padding:1px 7px;font-size:12px;font-weight:600}
.grid{display:flex;flex-wrap:wrap;gap:12px}.card{border:1px solid #e0e0e0;border-radius:4px;padding:8px;background:#fff}
.explain{color:#424242;margin:4px 0}summary{cursor:pointer;margin:6px 0}.muted{color:#757575;font-size:12px}
svg .t{font-size:12px;font-weight:600;fill:#333}svg .a{font-size:10px;fill:#555}
code{background:#f5f5f5;padding:0 3px;border-radius:3px}
.answer{border:1px solid #e0e0e0;border-left:4px solid #455a64;border-radius:4px;padding:8px 12px;margin:10px 0;background:#fafafa}
.answer .lead{font-size:15px;margin:2px 0 6px}.answer p{margin:4px 0}.answer ul{margin:2px 0 2px 18px;padding:0}
)";

constexpr const char* kScript = R"(
(function(){
  var errors=[];
  window.addEventListener('error',function(e){errors.push(String(e.message));});
  var bars=document.querySelectorAll('rect.bar').length, charts=document.querySelectorAll('svg').length;
  document.body.setAttribute('data-bars',String(bars));
  document.body.setAttribute('data-charts',String(charts));
  document.body.setAttribute('data-errors',String(errors.length));
  var ratio=0; document.querySelectorAll('svg.hist > title').forEach(function(t){if(t.textContent.indexOf('signed error / its bound')===0)ratio++;});
  document.body.setAttribute('data-ratio-charts',String(ratio));
  var s=document.getElementById('status'); if(s){s.textContent=charts+' charts, '+bars+' bars drawn';}
  var a=document.getElementById('answer'), o=document.getElementById('answer-observed');
  if(a){document.body.setAttribute('data-answer-bottom',String(Math.round(a.getBoundingClientRect().bottom)));}
  if(o){document.body.setAttribute('data-observed-bottom',String(Math.round(o.getBoundingClientRect().bottom)));}
})();
)";

std::string num(const std::optional<double>& v, const char* f = "{:.3g}") {
  return v ? fmt::format(fmt::runtime(f), *v) : std::string("–");
}

std::string badge(Verdict verdict) {
  return fmt::format(R"(<span class="badge" style="background:{}">{}</span>)", svg::verdict_colour(verdict),
                     name(verdict));
}

std::optional<double> stat(const std::optional<views::Stats>& s, std::optional<double> views::Stats::*field) {
  return s ? (*s).*field : std::nullopt;
}

std::optional<CompactHistogram> histogram(const views::Histograms& hs, const char* name) {
  const auto it = hs.find(name);
  return it == hs.end() ? std::nullopt : it->second;
}

std::string explanation(const views::Summary& s) {
  std::string h;
  for (const std::string& line : s.explanation) h += "<p class=\"explain\">" + escape(line) + "</p>";
  return h;
}

std::map<std::string, double> shares_of(const views::PathSummary& p) {
  std::map<std::string, double> m;
  if (p.shares)
    for (const auto& [k, v] : *p.shares)
      if (v) m[k] = *v;
  return m;
}

// A path's charts. First the ratio of each element's error to its own bound (the same scale
// on every path: 1 is the bound, bins beyond it red), then the ULP and ppm views, folded: a
// path's elements have bounds of very different sizes in ULP (a cancelled output's bound is
// many of its ULPs), so no single line on a ULP axis is "the bound". `why` says why the card
// is drawn.
std::string path_card(const views::PathSummary& p, const std::string& why) {
  const std::string label = fmt::format("{} · {} · {} · {}", p.dtype, p.accumulation, p.arithmetic, p.path);
  std::string h = "<div class=\"card\"><h4>" + escape(label) + " " + badge(p.verdict) + "</h4>";
  if (!why.empty()) h += "<p class=\"muted why\">shown: " + escape(why) + "</p>";
  if (const auto bound = histogram(p.histograms, "bound"))
    h += svg::signed_histogram(bound, 1.0, "1 = each element's own bound",
                               "signed error / its bound (within: |ratio| <= 1)");
  else
    h += "<p class=\"muted\">no per-element bound for this path (nothing was compared against one)</p>";
  h += "<details class=\"views\"><summary class=\"muted\">ULP and ppm views</summary>" +
       svg::signed_histogram(histogram(p.histograms, "ulp"), 0, "", "signed error, ULP of the exact value") + "<br>" +
       svg::signed_histogram(histogram(p.histograms, "ppm"), 0, "", "signed error, ppm") + "</details>";
  const auto sh = shares_of(p);
  if (!sh.empty()) h += svg::stage_bars(sh, "stage attribution (mean share of the squared error)");
  return h + "</div>";
}

// Why a path's card is drawn: it is not EXPECTED, or it is near its bound.
std::string why_shown(const views::PathSummary& p) {
  switch (p.verdict) {
    case Verdict::Unexpected: return fmt::format("not EXPECTED: {} element(s) beyond the bound", p.beyond_bound);
    case Verdict::Suspicious: return "SUSPICIOUS: beyond the probabilistic bound";
    case Verdict::Mistrusted: return "MISTRUSTED: nothing informative was compared";
    case Verdict::Expected: break;
  }
  return p.bound_ratio ? fmt::format("the worst element at {:.3g} of its bound", *p.bound_ratio) : "no bound";
}

// The answer first: the verdict with its reason, the observed weights with the recipes that
// reproduce them bit for bit, the other reasons, the assert_close tolerances. `id` makes the
// block findable ("answer" on a single run's page, "answer-eK" per suite entry). The answer
// is run_answer.hpp's (views/run.hpp RunAnswer).
std::string observed_weights(const RunAnswer::Observed& ow, const std::string& id) {
  std::string recipes;
  for (const std::string& r : ow.bit_exact) recipes += (recipes.empty() ? "" : ", ") + escape(r);
  const Verdict v = ow.verdict;
  std::string h =
      fmt::format("<p class=\"observed\" id=\"{}-observed\"><b>Observed weights</b>{} {} — {}</p>", id,
                  ow.note.empty() ? "" : " <span class=\"muted\">(" + escape(ow.note) + ")</span>", badge(v),
                  recipes.empty() ? std::string("no recipe reproduces them bit for bit")
                                  : "<b>BIT-EXACT</b>: " + recipes);
  if (v == Verdict::Expected && !ow.reasoning.empty())  // otherwise it is the lead sentence
    h += "<p class=\"explain\">" + escape(ow.reasoning[0]) + "</p>";
  return h;
}

std::string answer_block(const views::Summary& s, const std::string& id) {
  if (!s.answer) return "";
  const RunAnswer& a = *s.answer;
  const AnswerLines l = answer_lines(a);
  const std::vector<std::string>& why = a.reasoning;
  std::string h = R"(<div class="answer" id=")" + id + R"("><p class="lead">)" + badge(a.verdict) + " " +
                  escape(why.empty() ? std::string() : why[0]) + "</p>";
  if (a.observed_weights) h += observed_weights(*a.observed_weights, id);
  for (const std::string& m : l.more) h += "<p class=\"explain\">" + escape(m) + "</p>";
  if (!l.tolerances.empty()) {
    h += "<p class=\"muted\">assert_close tolerances implied by the bound:</p><ul class=\"muted\">";
    for (const std::string& t : l.tolerances) h += "<li>" + escape(t) + "</li>";
    h += "</ul>";
  }
  return h + "</div>";
}

// The charts of the paths a reader looks for, under a fold: every path that is not EXPECTED
// and the kMoreCards others nearest their bounds. Every path's numbers are in the table and
// its histograms in report.json: drawing all of them (a nightly suite has hundreds) made
// pages of megabytes.
constexpr std::size_t kMoreCards = 4;

std::string more_cards(const std::vector<views::PathSummary>& paths) {
  std::vector<std::size_t> order(paths.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  auto ratio = [&](std::size_t i) { return paths[i].bound_ratio.value_or(-1.0); };
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return ratio(a) > ratio(b); });
  std::vector<std::size_t> shown;
  std::size_t others = 0;
  for (const std::size_t i : order)
    if (paths[i].verdict != Verdict::Expected || others++ < kMoreCards) shown.push_back(i);
  std::sort(shown.begin(), shown.end());
  std::string h = fmt::format("<details><summary>histograms and attribution of the {} path(s) nearest their bounds or not "
                              "EXPECTED, of {} (every path's numbers are in the table; its histograms in the JSON result)"
                              "</summary><div class=\"grid\">",
                              shown.size(), paths.size());
  for (const std::size_t i : shown)
    h += path_card(paths[i], (paths[i].verdict == Verdict::Expected ? "among the nearest their bounds — " : "") +
                                 why_shown(paths[i]));
  return h + "</div></details>";
}

// A merged row's label cells: each column's values, and "(N rows, identical)" after the last
// when rows were merged.
std::string label_cells(const std::vector<std::vector<std::string>>& labels, const std::vector<std::size_t>& group,
                        std::size_t columns) {
  std::string h;
  for (std::size_t c = 0; c < columns; ++c) {
    h += "<td>" + escape(joined_column(labels, group, c));  // every name visible: a reader looks for the one they ran
    if (c + 1 == columns && group.size() > 1)
      h += fmt::format(" <span class=\"muted\">({} rows, identical)</span>", group.size());
    h += "</td>";
  }
  return h;
}

// Explanations in place (row_notes.hpp): a row under the row, spanning the table; a note the
// table has already shown (`shown`) is not repeated.
std::string note_rows(const std::vector<std::string>& notes, std::size_t columns, std::set<std::string>& shown) {
  std::string h;
  for (const std::string& n : notes)
    if (shown.insert(n).second)
      h += fmt::format("<tr class=\"note\"><td colspan=\"{}\" class=\"muted\">↳ {}</td></tr>", columns, escape(n));
  return h;
}

// Every path's numbers; rows of one order and arithmetic identical but for their path shown
// once (merging across two label columns would let a reader take every combination for one).
std::string paths_table(const std::vector<views::PathSummary>& paths) {
  std::vector<std::string> keys;
  std::vector<std::vector<std::string>> labels;
  for (const views::PathSummary& p : paths) {
    labels.push_back({p.accumulation, p.arithmetic, p.path});
    keys.push_back(
        p.accumulation + "\x1e" + p.arithmetic + "\x1e" +
        fmt::format("<td>{}</td><td>{}</td><td class=n>{}</td><td class=n>{}</td><td class=n>{}</td><td class=n>{}</td>"
                    "<td class=n>{}</td>",
                    escape(p.dtype), badge(p.verdict), num(stat(p.ulp, &views::Stats::p50)),
                    num(stat(p.ulp, &views::Stats::p99_9)), num(stat(p.ulp, &views::Stats::max_abs)),
                    num(p.bound_ratio), p.beyond_bound) +
        "\x1f" + json(p.note_list()).dump());
  }
  std::set<std::string> shown;
  std::string h = "<table class=\"paths\"><tr><th>order</th><th>arithmetic</th><th>path</th><th>dtype</th><th>verdict</th>"
                  "<th>|ULP| p50</th><th>p99.9</th><th>max</th><th>bound ratio</th><th>beyond bound</th></tr>";
  for (const auto& g : identical_groups(keys)) {
    const std::string& k = keys[g[0]];
    const std::size_t cells = k.rfind('\x1e') + 1;  // after the order and arithmetic that keep rows apart
    h += "<tr>" + label_cells(labels, g, 3) + k.substr(cells, k.find('\x1f') - cells) + "</tr>";
    h += note_rows(paths[g[0]].note_list(), 10, shown);
  }
  return h + "</table>";
}

// A folded part's cells: verdict, max |ULP|, ratio (dashes without the part).
std::string folded_part(const std::optional<views::SetSummary>& c) {
  if (!c) return "<td>–</td><td class=n>–</td><td class=n>–</td>";
  return fmt::format("<td>{}</td><td class=n>{}</td><td class=n>{}</td>", badge(c->verdict),
                     num(stat(c->ulp, &views::Stats::max_abs)), num(c->bound_ratio));
}

std::vector<std::string> notes_of(const std::optional<views::SetSummary>& c) {
  return c ? c->note_list() : std::vector<std::string>{};
}

// The folded parameters per recipe; rows of one arithmetic identical but for their recipe shown once.
std::string folded_table(const std::vector<views::FoldedSummary>& folded) {
  std::vector<std::string> keys;
  std::vector<std::vector<std::string>> labels;
  for (const views::FoldedSummary& f : folded) {
    labels.push_back({f.recipe, f.arithmetic});
    keys.push_back(f.arithmetic + "\x1e" + "<td>" + escape(f.dtype) + "</td>" + folded_part(f.weights) +
                   folded_part(f.bias) + "\x1f" + json(notes_of(f.weights)).dump() + json(notes_of(f.bias)).dump());
  }
  std::set<std::string> shown;
  std::string h = "<h4>Folded parameters against the exact fold</h4><table class=\"folded\"><tr><th>recipe</th>"
                  "<th>arithmetic</th><th>dtype</th><th>weights</th><th>max |ULP|</th><th>ratio</th><th>bias</th>"
                  "<th>max |ULP|</th><th>ratio</th></tr>";
  for (const auto& g : identical_groups(keys)) {
    const std::string& k = keys[g[0]];
    const std::size_t cells = k.find('\x1e') + 1;
    h += "<tr>" + label_cells(labels, g, 2) + k.substr(cells, k.find('\x1f') - cells) + "</tr>";
    std::vector<std::string> all = notes_of(folded[g[0]].weights);
    for (const std::string& n : notes_of(folded[g[0]].bias)) all.push_back(n);
    h += note_rows(all, 9, shown);
  }
  return h + "</table>";
}

// Headline charts: the first path and the path closest to its bound.
std::string headline_cards(const std::vector<views::PathSummary>& paths) {
  std::size_t worst = 0;
  double wr = -1;
  for (std::size_t i = 0; i < paths.size(); ++i)
    if (paths[i].bound_ratio && *paths[i].bound_ratio > wr) {
      wr = *paths[i].bound_ratio;
      worst = i;
    }
  std::string h = "<div class=\"grid\">";
  if (!paths.empty())
    h += path_card(paths[worst], (worst == 0 ? "the case's first path and the nearest its bound — " : "the path nearest its bound — ") +
                                     why_shown(paths[worst]));
  if (worst != 0) h += path_card(paths[0], "the case's first path — " + why_shown(paths[0]));
  return h + "</div>";
}

// Whether a path or a folded bias shows the cancellation note (weights do not cancel).
bool any_cancelled(const views::Summary& s) {
  return std::ranges::any_of(s.paths, [](const views::PathSummary& p) { return shows_cancellation(p.note_facts()); }) ||
         std::ranges::any_of(s.folded, [](const views::FoldedSummary& f) {
           return f.bias && shows_cancellation(f.bias->note_facts());
         });
}

std::string case_section(const views::Summary& s, const std::string& id) {
  std::string h = answer_block(s, id);
  const std::string& desc = s.description;
  if (!desc.empty()) h += "<p class=\"explain\">" + escape(desc) + "</p>";
  h += "<details><summary class=\"muted\">bounds used</summary>";
  for (const std::string& line : s.explanation)
    if (line != desc) h += "<p class=\"explain\">" + escape(line) + "</p>";
  h += "</details>";
  h += headline_cards(s.paths);
  h += paths_table(s.paths) + more_cards(s.paths);
  if (!s.folded.empty()) h += folded_table(s.folded);
  if (any_cancelled(s)) h += std::string("<p class=\"muted\">") + escape(kCancellationNote) + "</p>";
  return h;
}

// The model's charts: per-layer max |ULP| of the fused outputs and of the folded weights, and
// each end-to-end output's histogram. Each bar in the colour of what it measures: a layer
// UNEXPECTED by its fold has fused outputs that may be well within their bound.
std::string model_charts(const views::Summary& s) {
  std::vector<svg::LayerValue> fused, fold;
  for (const views::LayerSummary& l : s.layers) {
    if (l.fused) fused.push_back({l.name, l.fused->max_abs_ulp.value_or(0.0), l.fused->verdict});
    if (l.fold && l.fold->weights)
      fold.push_back(
          {l.name, stat(l.fold->weights->ulp, &views::Stats::max_abs).value_or(0.0), l.fold->weights->verdict});
  }
  std::string h = "<div class=\"grid\">";
  if (!fused.empty())
    h += "<div class=\"card\">" + svg::layer_chart(fused, "per layer: max |ULP| of the fused outputs on real activations", "ULP") +
         "</div>";
  if (!fold.empty())
    h += "<div class=\"card\">" + svg::layer_chart(fold, "per layer: max |ULP| of the folded weights", "ULP") + "</div>";
  if (s.end_to_end && s.end_to_end->outputs)
    for (const views::EndToEndOutput& o : *s.end_to_end->outputs)
      h += "<div class=\"card\">" +
           svg::signed_histogram(histogram(o.histograms, "ulp"), 0, "",
                                 "end to end: fused float32 output vs float64, ULP") +
           "</div>";
  return h + "</div>";
}

// One layer's row of the model's table.
std::string layer_row(const views::LayerSummary& l) {
  auto f = [&](const std::optional<views::ActivationSummary>& a, std::optional<double> views::ActivationSummary::*k) {
    return a ? num((*a).*k) : std::string("–");
  };
  auto part_max = [&](const std::optional<views::SetSummary> views::LayerFold::*part) {
    return l.fold ? num(stat(((*l.fold).*part) ? ((*l.fold).*part)->ulp : std::nullopt, &views::Stats::max_abs)) : "–";
  };
  const std::string row_style = l.verdict == Verdict::Expected ? "" : " style=\"background:#ffebee\"";
  const std::optional<std::int64_t> channel = l.fold ? l.fold->worst_channel : std::nullopt;
  return fmt::format(
      "<tr{}><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=n>{}</td><td class=n>{}</td><td class=n>{}</td>"
      "<td class=n>{}</td><td class=n>{}</td><td class=n>{}</td><td class=n>{}</td><td>{}</td><td class=n>{}</td></tr>",
      row_style, escape(l.name), escape(l.op), badge(l.verdict), escape(l.fold ? l.fold->recipe : ""),
      num(l.fold ? l.fold->fold_ratio : std::nullopt), part_max(&views::LayerFold::weights),
      part_max(&views::LayerFold::bias), f(l.fused, &views::ActivationSummary::p99_9_abs_ulp),
      f(l.fused, &views::ActivationSummary::bound_ratio), f(l.unfused, &views::ActivationSummary::p99_9_abs_ulp),
      f(l.unfused, &views::ActivationSummary::bound_ratio),
      l.fused ? escape(l.fused->dominant_stage.value_or("")) : "–", channel ? std::to_string(*channel) : "–");
}

// The end to end under the table: not run (why), or its verdict; the observed output; why the
// overall verdict differs from the end to end's.
std::string end_to_end_lines(const views::Summary& s, const views::EndToEndSummary& e) {
  std::string h;
  const char* verdict = e.verdict ? name(*e.verdict) : "";
  if (e.not_run) h += "<p class=\"explain\">End to end: not run (" + escape(*e.not_run) + ").</p>";
  else
    h += "<p class=\"explain\">End to end" + (e.fused_weights ? " (fused: " + escape(*e.fused_weights) + ")" : "") +
         ": " + badge(*e.verdict) + "</p>";
  if (e.observed_output)
    h += fmt::format("<p class=\"explain\">Observed output: {} (worst ratio to the end-to-end bound {})</p>",
                     badge(e.observed_output->verdict), num(e.observed_output->bound_ratio));
  if (!e.not_run && e.verdict != s.verdict) {  // e.g. a corrupted observed fold
    const bool out_bad = e.observed_output && e.observed_output->verdict != Verdict::Expected;
    const std::string also = overall_also_judges(out_bad, e.observed_model.value_or(false));
    h += fmt::format(
        "<p class=\"muted\">The overall verdict ({}) differs from that of foldcheck's own end-to-end runs ({}): "
        "the overall also judges {}.</p>",
        name(s.verdict), verdict, also);
  }
  return h;
}

std::string model_section(const views::Summary& s, const std::string& id) {
  std::string h = answer_block(s, id) + explanation(s) + model_charts(s);
  h +=
      "<table><tr><th>layer</th><th>op</th><th>verdict</th><th>recipe</th><th>fold ratio</th><th>weights max |ULP|</th>"
      "<th>bias max |ULP|</th><th>fused p99.9</th><th>fused ratio</th><th>unfused p99.9</th><th>unfused ratio</th>"
      "<th>dominant stage</th><th>worst channel</th></tr>";
  for (const views::LayerSummary& l : s.layers) {
    h += layer_row(l);
    if (l.note)
      h += "<tr><td></td><td colspan=12 class=\"explain\">" + escape(*l.note) +
           "</td></tr>";  // not the layer: what differs
  }
  h += "</table>";
  if (s.end_to_end) h += end_to_end_lines(s, *s.end_to_end);
  return h;
}

// One `run` or `accuracy-diff` result as a page of its own: its verdict and answer, then the
// evidence; no suite wording (entries, passed counts, results/ folders).
std::string single_page(const views::Report& r) {
  const views::ReportEntry& x = r.entries.at(0);
  const views::Summary& s = x.summary;
  std::string h = fmt::format(
      "<header><h1>foldcheck {} <code>{}</code> {}</h1>"
      "<p class=\"muted\">foldcheck {} · report schema {} · <span id=\"status\">charts not drawn"
      "</span></p></header>\n<section id=\"e0\">",
      escape(r.suite.single_command.value_or("")), escape(x.name), badge(s.verdict), escape(r.version),
      r.schema_version);
  h += s.is_run() ? case_section(s, "answer") : model_section(s, "answer");
  return h + "</section>\n";
}

// The suite's table of entries, with each entry's headline.
std::string entries_table(const views::Report& r) {
  std::string h =
      "<section><table><tr><th>entry</th><th>kind</th><th>verdict</th><th>expected</th><th>passed</th>"
      "<th>worst bound ratio</th><th>where</th><th>max p99.9 |ULP|</th></tr>";
  std::size_t k = 0;
  for (const views::ReportEntry& x : r.entries) {
    const Headline hl = headline(x.summary);
    h += fmt::format(
        "<tr><td><a href=\"#e{}\">{}</a></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=n>{}</td>"
        "<td>{}</td><td class=n>{}</td></tr>",
        k++, escape(x.name), escape(x.kind), badge(x.summary.verdict), name(x.expect),
        x.passed.value_or(false) ? "yes" : "<b style=\"color:#c62828\">no</b>", num(hl.worst_ratio),
        escape(hl.worst_where), num(hl.max_p99_9_ulp) + (hl.max_p99_9_ulp_cancelled ? " †" : ""));
  }
  h += "</table><p class=\"muted\">Ratios: worst |error| / its rounding-error bound (&gt; 1: beyond the bound). Histograms: "
       "each path's first chart is its elements' signed error / own bound in log2 bins (dashed red lines at ±1, bins beyond "
       "in red); bar heights on a log scale. " + escape(kP999Note) + "</p></section>\n";
  return h;
}

std::string html_page(const views::Report& r) {
  const std::string& suite = r.suite.name;
  std::int64_t passed = 0;
  for (const views::ReportEntry& x : r.entries) passed += x.passed.value_or(false);
  const bool ok = passed == static_cast<std::int64_t>(r.entries.size()) && !r.entries.empty();
  std::string h = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">";
  h += "<title>foldcheck: " + escape(suite) + "</title><style>" + kStyle + "</style></head><body>\n";
  if (r.suite.single_command) return h + single_page(r) + "<script>" + kScript + "</script></body></html>\n";
  h += fmt::format(
      "<header><h1>foldcheck suite <code>{}</code> {}</h1><p>{} of {} entries passed. {}</p>"
      "<p class=\"muted\">foldcheck {} · report schema {} · <span id=\"status\">charts not drawn</span></p></header>\n",
      escape(suite), badge(ok ? Verdict::Expected : Verdict::Unexpected), passed, r.entries.size(),
      escape(r.suite.description), escape(r.version), r.schema_version);
  h += entries_table(r);
  std::size_t k = 0;
  for (const views::ReportEntry& x : r.entries) {
    const views::Summary& s = x.summary;
    h += fmt::format("<section id=\"e{}\"><h2>{} {} <span class=\"muted\">{} · expected {}{}</span></h2>", k,
                     escape(x.name), badge(s.verdict), escape(x.kind), name(x.expect),
                     x.source ? " · " + escape(*x.source) : std::string());
    const std::string id = fmt::format("answer-e{}", k++);
    h += s.is_run() ? case_section(s, id) : model_section(s, id);
    h += "</section>\n";
  }
  h += std::string("<script>") + kScript + "</script></body></html>\n";
  return h;
}

}  // namespace

// Names are neutralised where they are written (escape, markdown_cell); the whole page again, so
// that no string a writer did not escape can drive a terminal or reorder what follows it (neutralise.hpp).
std::string report_html(const views::Report& r) { return neutralised_page(html_page(r)); }

std::string report_html(const json& report) { return report_html(report_of(neutralised_strings(report))); }

}  // namespace foldcheck::reports
