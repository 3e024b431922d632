// Report comparison (compare_reports.hpp).
#include "foldcheck/reports/compare_reports.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <string_view>
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include "markdown_cell.hpp"

#include "foldcheck/reports/summary.hpp"
#include "foldcheck/result/judgement.hpp"

namespace foldcheck::reports {

using json = nlohmann::json;
namespace views = result::views;

namespace {

std::string show(const json& v) {
  if (v.is_null()) return "-";
  if (v.is_number_float()) return fmt::format("{:.6g}", v.get<double>());
  if (v.is_string()) return v.get<std::string>();
  return v.dump();
}

// A typed value as a change records it: null when absent, a verdict by its name.
template <class T>
json value_of(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}
json value_of(const std::optional<Verdict>& v) { return v ? json(name(*v)) : json(nullptr); }
json value_of(const std::optional<views::Stats>& v) { return v ? v->to_json() : json(nullptr); }

std::optional<double> stat(const std::optional<views::Stats>& s, std::optional<double> views::Stats::*field) {
  return s ? (*s).*field : std::nullopt;
}

class Differ {
 public:
  explicit Differ(const CompareOptions& o) : o_(o) {}

  void change(const std::string& where, const std::string& stat, const json& a, const json& b, bool regression) {
    changes_.push_back({where, stat, a, b, regression});
  }
  void verdict(const std::string& where, std::optional<Verdict> a, std::optional<Verdict> b,
               const char* stat = "verdict") {
    if (a == b) return;
    change(where, stat, value_of(a), value_of(b), judgement::is_regression(a, b));
  }
  // A size statistic (non-negative: |ULP| percentiles, ppm, ratios), floor in its unit.
  void size(const std::string& where, const std::string& stat, std::optional<double> a, std::optional<double> b,
            double floor) {
    if (a == b) return;
    bool regression = false;
    if (a && b) regression = std::fabs(*b) > std::fabs(*a) * (1 + o_.tolerance) + floor;
    else if (a) regression = true;  // a finite ratio became unbounded
    change(where, stat, value_of(a), value_of(b), regression);
  }
  void count(const std::string& where, const std::string& stat, std::int64_t a, std::int64_t b) {
    if (a != b) change(where, stat, a, b, b > a);
  }
  void info(const std::string& where, const std::string& stat, const json& a, const json& b) {
    if (a != b) change(where, stat, a, b, false);
  }
  void stats(const std::string& where, const std::string& unit, const std::optional<views::Stats>& a,
             const std::optional<views::Stats>& b, double floor) {
    if (!a || !b) return info(where, unit, value_of(a), value_of(b));
    size(where, unit + ".p50", a->p50, b->p50, floor);
    size(where, unit + ".p99", a->p99, b->p99, floor);
    size(where, unit + ".p99_9", a->p99_9, b->p99_9, floor);
    size(where, unit + ".max_abs", a->max_abs, b->max_abs, floor);
  }
  void comparison(const std::string& where, const std::optional<views::SetSummary>& a,
                  const std::optional<views::SetSummary>& b) {
    if (!a || !b) return info(where, "present", a.has_value(), b.has_value());
    verdict(where, a->verdict, b->verdict);
    stats(where, "ulp", a->ulp, b->ulp, o_.ulp_floor);
    size(where, "bound_ratio", a->bound_ratio, b->bound_ratio, o_.ratio_floor);
    count(where, "beyond_bound", a->beyond_bound, b->beyond_bound);
  }

  // Records keyed by `key` in two lists: matched ones compared by f, missing ones a
  // regression, new ones reported.
  template <class T, class F>
  void keyed(const std::string& prefix, const std::vector<T>& a, const std::vector<T>& b, F f) {
    std::map<std::string, const T*> cur;
    for (const T& x : b) cur[x.key] = &x;
    for (const T& x : a) {
      const auto it = cur.find(x.key);
      if (it == cur.end()) {
        change(prefix + x.key, "present", true, false, true);
        continue;
      }
      f(prefix + x.key, x, *it->second);
      cur.erase(it);
    }
    for (const auto& [k, x] : cur) change(prefix + k, "present", false, true, false);
  }

  void path(const std::string& w, const views::PathSummary& x, const views::PathSummary& y) {
    info(w, "arithmetic", x.arithmetic, y.arithmetic);
    verdict(w, x.verdict, y.verdict);
    stats(w, "ulp", x.ulp, y.ulp, o_.ulp_floor);
    size(w, "ppm.p99_9", stat(x.ppm, &views::Stats::p99_9), stat(y.ppm, &views::Stats::p99_9), o_.ppm_floor);
    size(w, "bound_ratio", x.bound_ratio, y.bound_ratio, o_.ratio_floor);
    size(w, "probabilistic_ratio", x.probabilistic_ratio, y.probabilistic_ratio, o_.ratio_floor);
    count(w, "beyond_bound", x.beyond_bound, y.beyond_bound);
    if (x.shares)
      for (const auto& [stage, v] : *x.shares) {
        std::optional<double> v2;
        if (y.shares)
          if (const auto it = y.shares->find(stage); it != y.shares->end()) v2 = it->second;
        if (v && v2 && std::fabs(*v - *v2) > o_.share_change) info(w, "share_mean." + stage, *v, *v2);
      }
    if (x.histograms != y.histograms && x.ulp == y.ulp) info(w, "histograms", "baseline", "changed");
  }

  void run(const views::Summary& a, const views::Summary& b) {
    keyed("", a.paths, b.paths, [&](const std::string& w, const auto& x, const auto& y) { path(w, x, y); });
    keyed("folded ", a.folded, b.folded, [&](const std::string& w, const auto& x, const auto& y) {
      info(w, "arithmetic", x.arithmetic, y.arithmetic);
      comparison(w + " weights", x.weights, y.weights);
      comparison(w + " bias", x.bias, y.bias);
    });
    verdict("observed weights", a.observed_weights_verdict, b.observed_weights_verdict);
  }

  void activations(const std::string& wp, const views::ActivationSummary& u, const views::ActivationSummary& v) {
    verdict(wp, u.verdict, v.verdict);
    size(wp, "p99_9_abs_ulp", u.p99_9_abs_ulp, v.p99_9_abs_ulp, o_.ulp_floor);
    size(wp, "max_abs_ulp", u.max_abs_ulp, v.max_abs_ulp, o_.ulp_floor);
    size(wp, "bound_ratio", u.bound_ratio, v.bound_ratio, o_.ratio_floor);
    info(wp, "dominant_stage", value_of(u.dominant_stage), value_of(v.dominant_stage));
  }

  void layer(const std::string& w, const views::LayerSummary& x, const views::LayerSummary& y) {
    const views::LayerFold none{};
    const views::LayerFold &fx = x.fold ? *x.fold : none, &fy = y.fold ? *y.fold : none;
    verdict(w, x.verdict, y.verdict);
    info(w, "recipe", x.fold ? json(fx.recipe) : json(), y.fold ? json(fy.recipe) : json());
    size(w, "fold_ratio", fx.fold_ratio, fy.fold_ratio, o_.ratio_floor);
    if (x.fold && y.fold) {
      comparison(w + " weights", fx.weights, fy.weights);
      comparison(w + " bias", fx.bias, fy.bias);
    }
    info(w, "worst_channel", value_of(fx.worst_channel), value_of(fy.worst_channel));
    for (const auto& [p, u, v] :
         {std::tuple{"fused", &x.fused, &y.fused}, std::tuple{"unfused", &x.unfused, &y.unfused}}) {
      if (!*u || !*v) {
        info(w, std::string(p) + " run", u->has_value(), v->has_value());
        continue;
      }
      activations(w + " " + p, **u, **v);
    }
  }

  void end_to_end(const views::EndToEndSummary& ea, const views::EndToEndSummary& eb) {
    verdict("end to end", ea.verdict, eb.verdict);
    const std::vector<views::EndToEndOutput> none;
    const auto &oa = ea.outputs ? *ea.outputs : none, &ob = eb.outputs ? *eb.outputs : none;
    for (std::size_t i = 0; i < oa.size() && i < ob.size(); ++i) {
      comparison(fmt::format("end to end {} unfused", oa[i].name), oa[i].unfused, ob[i].unfused);
      comparison(fmt::format("end to end {} fused", oa[i].name), oa[i].fused, ob[i].fused);
    }
    if (ea.observed_output || eb.observed_output) {
      const views::ObservedOutput* x = ea.observed_output ? &*ea.observed_output : nullptr;
      const views::ObservedOutput* y = eb.observed_output ? &*eb.observed_output : nullptr;
      verdict("observed output", x ? std::optional(x->verdict) : std::nullopt,
              y ? std::optional(y->verdict) : std::nullopt);
      size("observed output", "bound_ratio", x ? x->bound_ratio : std::nullopt, y ? y->bound_ratio : std::nullopt,
           o_.ratio_floor);
    }
  }

  void model(const views::Summary& a, const views::Summary& b) {
    keyed("layer ", a.layers, b.layers, [&](const std::string& w, const auto& x, const auto& y) { layer(w, x, y); });
    end_to_end(a.end_to_end.value_or(views::EndToEndSummary{}), b.end_to_end.value_or(views::EndToEndSummary{}));
  }

  // One entry present in both reports: passed, command, verdict, then the summaries' records.
  void entry(const views::ReportEntry& b, const views::ReportEntry& c) {
    const bool was = b.passed.value_or(true), is = c.passed.value_or(true);
    if (was && !is) change("entry", "passed", true, false, true);
    else if (was != is) change("entry", "passed", was, is, false);
    const views::Summary &sa = b.summary, &sb = c.summary;
    if (sa.command != sb.command) return change("entry", "command", sa.command, sb.command, true);
    verdict("entry", sa.verdict, sb.verdict);
    if (sa.is_run()) run(sa, sb);
    else model(sa, sb);
  }

  std::vector<views::Change> take() { return std::exchange(changes_, {}); }

 private:
  const CompareOptions& o_;
  std::vector<views::Change> changes_;
};

// The comparison's entries and counts, one record per entry.
struct DiffTally {
  views::ReportDiff d;
  void record(const std::string& name, const std::string& forced_status, std::vector<views::Change> changes) {
    bool reg = false;
    for (const views::Change& c : changes) reg = reg || c.regression;
    std::string status = forced_status;
    if (status.empty()) status = reg ? "regressed" : changes.empty() ? "unchanged" : "changed";
    d.regressions += status == "regressed" || status == "removed";
    d.changes += status != "unchanged";
    d.entries.push_back({name, status, std::move(changes)});
  }
};

}  // namespace

views::Report report_of(const json& r) {
  const views::ResultEnvelope env = views::ResultEnvelope::from_json(r);
  if (env.command == "suite") return views::Report::from_json(r);
  views::Report rep;
  rep.version = env.version;
  rep.schema_version = env.schema_version;
  views::ReportEntry e;
  e.summary = summary_of(r);
  rep.suite = {e.summary.name, e.summary.description, e.summary.command, std::nullopt, json()};
  e.name = e.summary.name;
  e.kind = e.summary.is_run() ? "case" : "model";
  e.expect = Verdict::Expected;
  e.passed = e.summary.verdict == Verdict::Expected;
  rep.entries.push_back(std::move(e));
  return rep;
}

views::ReportDiff compare_reports(const views::Report& cur, const views::Report& base, const CompareOptions& o) {
  std::map<std::string, const views::ReportEntry*> by_name;
  for (const views::ReportEntry& e : cur.entries) by_name[e.name] = &e;
  Differ d(o);
  DiffTally t;
  t.d.tolerance = {o.tolerance, o.ulp_floor, o.ppm_floor, o.ratio_floor, o.share_change};
  for (const views::ReportEntry& b : base.entries) {
    const auto it = by_name.find(b.name);
    if (it == by_name.end()) {
      t.record(b.name, "removed", {});
      continue;
    }
    d.entry(b, *it->second);
    t.record(b.name, "", d.take());
    by_name.erase(it);
  }
  for (const views::ReportEntry& e : cur.entries)
    if (by_name.contains(e.name)) t.record(e.name, "added", {});
  t.d.verdict = judgement::of_check({.failed = t.d.regressions > 0});
  return t.d;
}

json compare_reports(const json& current, const json& baseline, const CompareOptions& o) {
  return compare_reports(report_of(current), report_of(baseline), o).to_json();
}

namespace {

std::string change_line(const views::Change& c) {
  return fmt::format("{}: {} {} -> {}{}", c.where, c.statistic, show(c.baseline), show(c.current),
                     c.regression ? "  (REGRESSION)" : "");
}

std::string tolerance_line(const views::ReportDiff& d) {
  const views::CompareTolerance& t = d.tolerance;
  return fmt::format(
      "a size statistic regresses when new > old x {:.3g} + floor (ULP {:.3g}, ppm {:.3g}, ratio {:.3g})",
      1 + t.relative, t.ulp_floor, t.ppm_floor, t.ratio_floor);
}

// An entry's changes for the text: every regression, then up to kOtherChanges others.
std::string entry_changes(const views::EntryDiff& e) {
  constexpr std::size_t kOtherChanges = 12;  // per entry, after every regression
  std::string s;
  std::size_t others = 0, hidden = 0;
  for (const views::Change& c : e.changes)
    if (c.regression) s += "    " + change_line(c) + "\n";
  for (const views::Change& c : e.changes)
    if (!c.regression) (others++ < kOtherChanges ? s += "    " + change_line(c) + "\n" : (++hidden, s));
  if (hidden) s += fmt::format("    … {} more changes (--format json lists all)\n", hidden);
  return s;
}

// How many of d's entries have status.
std::ptrdiff_t with_status(const views::ReportDiff& d, std::string_view status) {
  return std::count_if(d.entries.begin(), d.entries.end(),
                       [&](const views::EntryDiff& e) { return e.status == status; });
}

std::string diff_text(const views::ReportDiff& d) {
  std::string s = "foldcheck compare — " + tolerance_line(d) + "\n";
  for (const views::EntryDiff& e : d.entries) {
    if (e.status == "unchanged") continue;
    s += fmt::format("  {}: {}\n", e.name, e.status);
    s += entry_changes(e);
  }
  s += fmt::format("{} entries: {} regressed, {} removed, {} changed, {} added, {} unchanged\n", d.entries.size(),
                   with_status(d, "regressed"), with_status(d, "removed"), with_status(d, "changed"),
                   with_status(d, "added"), with_status(d, "unchanged"));
  s += fmt::format("verdict: {}\n", d.regressions ? "REGRESSION" : "no regression");
  return s;
}

std::string diff_markdown(const views::ReportDiff& d) {
  std::string s = fmt::format("## foldcheck compare: {}\n\n", d.regressions ? "❌ regression" : "✅ no regression");
  s += "_" + tolerance_line(d) + "_\n\n| entry | status | changes |\n|---|---|---|\n";
  for (const views::EntryDiff& e : d.entries)
    s += fmt::format("| {} | {} | {} |\n", markdown_cell(e.name), e.status, e.changes.size());
  for (const views::EntryDiff& e : d.entries) {
    if (e.changes.empty()) continue;
    s += fmt::format("\n### {} ({})\n\n", markdown_cell(e.name), e.status);
    for (const views::Change& c : e.changes) s += "- " + markdown_cell(change_line(c)) + "\n";
  }
  return s;
}

}  // namespace

std::string compare_text(const json& d) { return diff_text(views::ReportDiff::from_json(d)); }
std::string compare_markdown(const json& d) { return diff_markdown(views::ReportDiff::from_json(d)); }

}  // namespace foldcheck::reports
