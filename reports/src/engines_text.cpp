// Terminal rendering of `foldcheck engines` results.
#include <fmt/format.h>

#include "foldcheck/reports/text.hpp"

namespace foldcheck::reports {

using json = nlohmann::json;

namespace {

std::string num(const json& v) { return v.is_null() ? std::string("-") : fmt::format("{:.3g}", v.get<double>()); }

std::string shorten(std::string s, std::size_t w) { return s.size() > w ? "…" + s.substr(s.size() - (w - 1)) : s; }

// A layer's weight cells: the ratio to the closest recipe's bound and the worst channel.
std::string weight_cells(const json& w) {
  if (w.is_null()) return fmt::format("{:>8} {:<13} {:>6}", "-", "-", "-");
  if (w.contains("note")) return fmt::format("{:>8} {:<13} {:>6}", "not fold", "-", "-");
  return fmt::format("{:>8} {:<13} {:>6}", num(w.value("worst_ratio", json())), w.value("closest_recipe", std::string("-")),
                     w.value("worst_channel", json()).is_null() ? std::string("-") : std::to_string(w["worst_channel"].get<std::int64_t>()));
}

// A layer's output cells: the ratios to the deterministic and probabilistic bounds, and the
// channel statistic's worst channel (rho and its estimated threshold, in ppm).
std::string output_cells(const json& o) {
  if (o.is_null() || o.contains("not_checked") || o.contains("left_out")) return fmt::format("{:>6} {:>6} {:>9} {:>9} {:>6}", "-", "-", "-", "-", "-");
  const json& ch = o["channels"];
  std::string rho = "-", thr = "-", chan = "-";  // none for Winograd (not_computed)
  if (ch.contains("worst")) {
    rho = fmt::format("{:+.3g}", ch["worst"]["rho_ppm"].get<double>());
    thr = fmt::format("{:.3g}", ch["worst"]["estimated_threshold_ppm"].get<double>());
    chan = std::to_string(ch["worst"]["channel"].get<std::int64_t>());
  }
  return fmt::format("{:>6} {:>6} {:>9} {:>9} {:>6}", num(o["worst_ratio"]), num(o["probabilistic_worst_ratio"]), rho, thr, chan);
}

std::string engine_block(const json& e) {
  std::string s = fmt::format("{} — {}  {}  ({:.1f} s)\n", e["label"].get<std::string>(),
                              e["engine"].get<std::string>().empty() ? "?" : e["engine"].get<std::string>(),
                              e["verdict"].get<std::string>(), e["seconds"].get<double>());
  if (!e["failed"].is_null()) return s + "  not checked: " + e["failed"].get<std::string>() + "\n\n";
  for (const json& n : e["notes"]) s += "  note: " + n.get<std::string>() + "\n";
  if (e["fusion_preserved"] == false) s += "  the per-layer run did not reproduce the fused run's outputs: layer outputs not judged\n";
  for (const json& f : e["final_outputs"])
    s += fmt::format("  final output {}: {} (worst ratio {} to the end-to-end bound, {} runs)\n", f["name"].get<std::string>(),
                     f["verdict"].get<std::string>(), num(f["worst_ratio"]), f["samples"].get<std::size_t>());
  if (!e["final_not_checked"].is_null()) s += "  final outputs not judged: " + e["final_not_checked"].get<std::string>() + "\n";
  s += fmt::format("  first layer beyond its bound: weights {}, outputs {}\n",
                   e["first_weights_beyond"].is_null() ? "none" : e["first_weights_beyond"].get<std::string>(),
                   e["first_outputs_beyond"].is_null() ? "none" : e["first_outputs_beyond"].get<std::string>());
  s += fmt::format("  {:<28} {:<11} {:>8} {:<13} {:>6} {:>6} {:>6} {:>9} {:>9} {:>6}\n", "layer", "verdict", "w ratio",
                   "recipe", "w chan", "ratio", "prob", "rho ppm", "thr ppm", "chan");
  for (const json& l : e["layers"]) {
    s += fmt::format("  {:<28} {:<11} {} {}\n", shorten(l["name"].get<std::string>(), 28), l["verdict"].get<std::string>(),
                     weight_cells(l["weights"]), output_cells(l["outputs"]));
    if (l["outputs"].is_object() && l["outputs"].contains("not_checked"))
      s += "      outputs not checked: " + l["outputs"]["not_checked"].get<std::string>() + "\n";
    if (l["outputs"].is_object() && l["outputs"].contains("left_out"))
      s += "      left out by the engine: " + l["outputs"]["left_out"].get<std::string>() + "\n";
  }
  return s + "\n";
}

}  // namespace

std::string engines_text(const json& r) {
  const json& m = r["model"];
  std::string s = fmt::format("foldcheck engines {} — {} layer -> BatchNormalization pair(s)\n", m["path"].get<std::string>(),
                              m["pairs"].get<std::size_t>());
  s += "  w ratio: folded weights' worst distance to the exact fold / the closest recipe's bound. ratio, prob: each conv's "
       "output on the engine's own input against the certified original layer, worst distance / the deterministic and "
       "the probabilistic bound. rho: a channel's estimated common relative change; thr: what a correct fold and honest "
       "kernels reach on this input (false alarm <= " +
       fmt::format("{:.2g}", r["channel_statistic"]["false_alarm_per_channel"].get<double>()) +
       " per channel). > 1 or |rho| > thr: UNEXPECTED.\n\n";
  for (const json& e : r["engines"]) s += engine_block(e);
  s += "verdict: " + r["verdict"].get<std::string>() + seconds_suffix(r) + "\n";
  return s;
}

}  // namespace foldcheck::reports
