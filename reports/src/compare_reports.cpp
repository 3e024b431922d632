// Report comparison (compare_reports.hpp).
#include "foldcheck/reports/compare_reports.hpp"

#include <cmath>
#include <map>

#include <fmt/format.h>

#include "markdown_cell.hpp"

#include "foldcheck/reports/summary.hpp"
#include "foldcheck/result/judgement.hpp"

namespace foldcheck::reports {

using json = nlohmann::json;

namespace {

// A verdict as a report file holds it (absent for anything but a verdict's spelling).
std::optional<Verdict> verdict_in(const json& v) {
  return v.is_string() ? verdict_named(v.get<std::string>()) : std::nullopt;
}

std::string show(const json& v) {
  if (v.is_null()) return "-";
  if (v.is_number_float()) return fmt::format("{:.6g}", v.get<double>());
  if (v.is_string()) return v.get<std::string>();
  return v.dump();
}

class Differ {
 public:
  explicit Differ(const CompareOptions& o) : o_(o) {}

  void change(const std::string& where, const std::string& stat, const json& a, const json& b, bool regression) {
    changes_.push_back({{"where", where}, {"statistic", stat}, {"baseline", a}, {"current", b}, {"regression", regression}});
  }
  void verdict(const std::string& where, const json& a, const json& b, const char* stat = "verdict") {
    if (a == b) return;
    change(where, stat, a, b, judgement::is_regression(verdict_in(a), verdict_in(b)));
  }
  // A size statistic (non-negative: |ULP| percentiles, ppm, ratios), floor in its unit.
  void size(const std::string& where, const std::string& stat, const json& a, const json& b, double floor) {
    if (a == b) return;
    bool regression = false;
    if (a.is_number() && b.is_number()) {
      const double x = std::fabs(a.get<double>()), y = std::fabs(b.get<double>());
      regression = y > x * (1 + o_.tolerance) + floor;
    } else if (a.is_number() && b.is_null()) {
      regression = true;  // a finite ratio became unbounded
    }
    change(where, stat, a, b, regression);
  }
  void count(const std::string& where, const std::string& stat, const json& a, const json& b) {
    if (a == b) return;
    change(where, stat, a, b, b.is_number() && a.is_number() && b.get<double>() > a.get<double>());
  }
  void info(const std::string& where, const std::string& stat, const json& a, const json& b) {
    if (a != b) change(where, stat, a, b, false);
  }
  void stats(const std::string& where, const std::string& unit, const json& a, const json& b, double floor) {
    if (!a.is_object() || !b.is_object()) return info(where, unit, a, b);
    for (const char* k : {"p50", "p99", "p99_9", "max_abs"}) size(where, unit + "." + k, a.value(k, json()), b.value(k, json()), floor);
  }
  void comparison(const std::string& where, const json& a, const json& b) {
    if (!a.is_object() || !b.is_object()) return info(where, "present", a.is_object(), b.is_object());
    verdict(where, a.value("verdict", json()), b.value("verdict", json()));
    stats(where, "ulp", a.value("ulp", json()), b.value("ulp", json()), o_.ulp_floor);
    size(where, "bound_ratio", a.value("bound_ratio", json()), b.value("bound_ratio", json()), o_.ratio_floor);
    count(where, "beyond_bound", a.value("beyond_bound", json()), b.value("beyond_bound", json()));
  }

  // Records keyed by "key" in two arrays: matched ones compared by f, missing ones a
  // regression, new ones reported.
  template <class F>
  void keyed(const std::string& prefix, const json& a, const json& b, F f) {
    std::map<std::string, const json*> cur;
    if (b.is_array())
      for (const json& x : b) cur[x["key"].get<std::string>()] = &x;
    if (a.is_array())
      for (const json& x : a) {
        const std::string k = x["key"];
        const auto it = cur.find(k);
        if (it == cur.end()) {
          change(prefix + k, "present", true, false, true);
          continue;
        }
        f(prefix + k, x, *it->second);
        cur.erase(it);
      }
    for (const auto& [k, x] : cur) change(prefix + k, "present", false, true, false);
  }

  void run(const json& a, const json& b) {
    keyed("", a["paths"], b["paths"], [&](const std::string& w, const json& x, const json& y) {
      info(w, "arithmetic", x["arithmetic"], y["arithmetic"]);
      verdict(w, x["verdict"], y["verdict"]);
      stats(w, "ulp", x["ulp"], y["ulp"], o_.ulp_floor);
      size(w, "ppm.p99_9", x["ppm"].value("p99_9", json()), y["ppm"].value("p99_9", json()), o_.ppm_floor);
      size(w, "bound_ratio", x.value("bound_ratio", json()), y.value("bound_ratio", json()), o_.ratio_floor);
      size(w, "probabilistic_ratio", x.value("probabilistic_ratio", json()), y.value("probabilistic_ratio", json()),
           o_.ratio_floor);
      count(w, "beyond_bound", x.value("beyond_bound", json()), y.value("beyond_bound", json()));
      const json sa = x.value("shares", json::object()), sb = y.value("shares", json::object());
      for (const auto& [stage, v] : sa.items()) {
        const json w2 = sb.value(stage, json());
        if (v.is_number() && w2.is_number() && std::fabs(v.get<double>() - w2.get<double>()) > o_.share_change)
          info(w, "share_mean." + stage, v, w2);
      }
      if (x.value("histograms", json()) != y.value("histograms", json()) && x.value("ulp", json()) == y.value("ulp", json()))
        info(w, "histograms", "baseline", "changed");
    });
    keyed("folded ", a["folded"], b["folded"], [&](const std::string& w, const json& x, const json& y) {
      info(w, "arithmetic", x["arithmetic"], y["arithmetic"]);
      comparison(w + " weights", x["weights"], y["weights"]);
      comparison(w + " bias", x["bias"], y["bias"]);
    });
    verdict("observed weights", a.value("observed_weights_verdict", json()), b.value("observed_weights_verdict", json()));
  }

  void model(const json& a, const json& b) {
    keyed("layer ", a["layers"], b["layers"], [&](const std::string& w, const json& x, const json& y) {
      verdict(w, x["verdict"], y["verdict"]);
      info(w, "recipe", x.value("recipe", json()), y.value("recipe", json()));
      size(w, "fold_ratio", x.value("fold_ratio", json()), y.value("fold_ratio", json()), o_.ratio_floor);
      if (x.contains("weights") && y.contains("weights")) {
        comparison(w + " weights", x["weights"], y["weights"]);
        comparison(w + " bias", x["bias"], y["bias"]);
      }
      info(w, "worst_channel", x.value("worst_channel", json()), y.value("worst_channel", json()));
      for (const char* p : {"fused", "unfused"}) {
        if (!x.contains(p) || !y.contains(p)) {
          info(w, std::string(p) + " run", x.contains(p), y.contains(p));
          continue;
        }
        const json &u = x[p], &v = y[p];
        const std::string wp = w + " " + p;
        verdict(wp, u["verdict"], v["verdict"]);
        size(wp, "p99_9_abs_ulp", u["p99_9_abs_ulp"], v["p99_9_abs_ulp"], o_.ulp_floor);
        size(wp, "max_abs_ulp", u["max_abs_ulp"], v["max_abs_ulp"], o_.ulp_floor);
        size(wp, "bound_ratio", u["bound_ratio"], v["bound_ratio"], o_.ratio_floor);
        info(wp, "dominant_stage", u.value("dominant_stage", json()), v.value("dominant_stage", json()));
      }
    });
    const json ea = a.value("end_to_end", json::object()), eb = b.value("end_to_end", json::object());
    verdict("end to end", ea.value("verdict", json()), eb.value("verdict", json()));
    const json oa = ea.value("outputs", json::array()), ob = eb.value("outputs", json::array());
    for (std::size_t i = 0; i < oa.size() && i < ob.size(); ++i)
      for (const char* p : {"unfused", "fused"})
        comparison(fmt::format("end to end {} {}", oa[i]["name"].get<std::string>(), p), oa[i][p], ob[i][p]);
    if (ea.contains("observed_output") || eb.contains("observed_output")) {
      const json x = ea.value("observed_output", json::object()), y = eb.value("observed_output", json::object());
      verdict("observed output", x.value("verdict", json()), y.value("verdict", json()));
      size("observed output", "bound_ratio", x.value("bound_ratio", json()), y.value("bound_ratio", json()), o_.ratio_floor);
    }
  }

  json take() { return std::exchange(changes_, json::array()); }

 private:
  const CompareOptions& o_;
  json changes_ = json::array();
};

}  // namespace

json as_report(const json& r) {
  if (r.value("command", "") == "suite") return r;
  const json s = summarize(r);
  return {{"tool", r.value("tool", "foldcheck")},
          {"version", r.value("version", "")},
          {"schema_version", r.value("schema_version", 0)},
          {"command", "suite"},
          {"suite", {{"name", s["name"]}, {"description", s["description"]}, {"single_command", s["command"]}}},
          {"entries", json::array({json{{"index", 0}, {"name", s["name"]}, {"kind", s["command"] == "run" ? "case" : "model"},
                                        {"expect", "EXPECTED"}, {"passed", s["verdict"] == "EXPECTED"}, {"summary", s}}})},
          {"verdict", s["verdict"]}};
}

json compare_reports(const json& current_in, const json& baseline_in, const CompareOptions& o) {
  const json cur = as_report(current_in), base = as_report(baseline_in);
  std::map<std::string, const json*> by_name;
  for (const json& e : cur["entries"]) by_name[e["name"].get<std::string>()] = &e;
  Differ d(o);
  json entries = json::array();
  std::int64_t regressions = 0, changed = 0;
  auto record = [&](const std::string& name, const std::string& forced_status, json changes) {
    bool reg = false;
    for (const json& c : changes) reg = reg || c["regression"].get<bool>();
    std::string status = forced_status;
    if (status.empty()) status = reg ? "regressed" : changes.empty() ? "unchanged" : "changed";
    regressions += status == "regressed" || status == "removed";
    changed += status != "unchanged";
    entries.push_back({{"name", name}, {"status", status}, {"changes", std::move(changes)}});
  };
  for (const json& b : base["entries"]) {
    const std::string name = b["name"];
    const auto it = by_name.find(name);
    if (it == by_name.end()) {
      record(name, "removed", json::array());
      continue;
    }
    const json& c = *it->second;
    if (b.value("passed", true) && !c.value("passed", true))
      d.change("entry", "passed", true, false, true);
    else if (b.value("passed", true) != c.value("passed", true))
      d.change("entry", "passed", b.value("passed", true), c.value("passed", true), false);
    const json &sa = b["summary"], &sb = c["summary"];
    if (sa["command"] != sb["command"]) {
      d.change("entry", "command", sa["command"], sb["command"], true);
    } else {
      d.verdict("entry", sa["verdict"], sb["verdict"]);
      if (sa["command"] == "run") d.run(sa, sb);
      else d.model(sa, sb);
    }
    record(name, "", d.take());
    by_name.erase(it);
  }
  for (const json& e : cur["entries"])
    if (by_name.count(e["name"].get<std::string>())) record(e["name"], "added", json::array());
  return {{"command", "compare"},
          {"tolerance",
           {{"relative", o.tolerance},
            {"ulp_floor", o.ulp_floor},
            {"ppm_floor", o.ppm_floor},
            {"ratio_floor", o.ratio_floor},
            {"share_change", o.share_change}}},
          {"entries", entries},
          {"regressions", regressions},
          {"changes", changed},
          {"verdict", name(judgement::of_check({.failed = regressions > 0}))}};
}

namespace {

std::string change_line(const json& c) {
  return fmt::format("{}: {} {} -> {}{}", c["where"].get<std::string>(), c["statistic"].get<std::string>(),
                     show(c["baseline"]), show(c["current"]), c["regression"].get<bool>() ? "  (REGRESSION)" : "");
}

std::string tolerance_line(const json& d) {
  const json& t = d["tolerance"];
  return fmt::format("a size statistic regresses when new > old x {:.3g} + floor (ULP {:.3g}, ppm {:.3g}, ratio {:.3g})",
                     1 + t["relative"].get<double>(), t["ulp_floor"].get<double>(), t["ppm_floor"].get<double>(),
                     t["ratio_floor"].get<double>());
}

}  // namespace

std::string compare_text(const json& d) {
  std::string s = "foldcheck compare — " + tolerance_line(d) + "\n";
  std::map<std::string, int> counts;
  constexpr std::size_t kOtherChanges = 12;  // per entry, after every regression
  for (const json& e : d["entries"]) {
    const std::string st = e["status"];
    ++counts[st];
    if (st == "unchanged") continue;
    s += fmt::format("  {}: {}\n", e["name"].get<std::string>(), st);
    std::size_t others = 0, hidden = 0;
    for (const json& c : e["changes"])
      if (c["regression"].get<bool>()) s += "    " + change_line(c) + "\n";
    for (const json& c : e["changes"])
      if (!c["regression"].get<bool>()) (others++ < kOtherChanges ? s += "    " + change_line(c) + "\n" : (++hidden, s));
    if (hidden) s += fmt::format("    … {} more changes (--format json lists all)\n", hidden);
  }
  s += fmt::format("{} entries: {} regressed, {} removed, {} changed, {} added, {} unchanged\n", d["entries"].size(),
                   counts["regressed"], counts["removed"], counts["changed"], counts["added"], counts["unchanged"]);
  s += fmt::format("verdict: {}\n", d["regressions"].get<std::int64_t>() ? "REGRESSION" : "no regression");
  return s;
}

std::string compare_markdown(const json& d) {
  std::string s = fmt::format("## foldcheck compare: {}\n\n", d["regressions"].get<std::int64_t>() ? "❌ regression" : "✅ no regression");
  s += "_" + tolerance_line(d) + "_\n\n| entry | status | changes |\n|---|---|---|\n";
  for (const json& e : d["entries"])
    s += fmt::format("| {} | {} | {} |\n", markdown_cell(e["name"].get<std::string>()), e["status"].get<std::string>(),
                     e["changes"].size());
  for (const json& e : d["entries"]) {
    if (e["changes"].empty()) continue;
    s += fmt::format("\n### {} ({})\n\n", markdown_cell(e["name"].get<std::string>()), e["status"].get<std::string>());
    for (const json& c : e["changes"]) s += "- " + markdown_cell(change_line(c)) + "\n";
  }
  return s;
}

}  // namespace foldcheck::reports
