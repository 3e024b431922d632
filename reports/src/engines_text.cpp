// Terminal rendering of `foldcheck engines` results.
#include <fmt/format.h>

#include "foldcheck/reports/text.hpp"

namespace foldcheck::reports {

using json = nlohmann::json;

namespace {

std::string num(const json& v) { return v.is_null() ? std::string("-") : fmt::format("{:.3g}", v.get<double>()); }

// A name in w columns: its start and its end, the middle elided (the ends tell layers apart).
std::string shorten(std::string s, std::size_t w) {
  if (s.size() <= w) return s;
  const std::size_t head = (w - 1) / 3;
  return s.substr(0, head) + "…" + s.substr(s.size() - (w - 1 - head));
}

// A layer's weight cells: the ratio to the closest recipe's bound and the worst channel.
std::string weight_cells(const json& w) {
  if (w.is_null()) return fmt::format("{:>8} {:<13} {:>6}", "-", "-", "-");
  if (w.contains("not_folded")) return fmt::format("{:>8} {:<13} {:>6}", "unfolded", "-", "-");
  return fmt::format("{:>8} {:<13} {:>6}", num(w.value("worst_ratio", json())), w.value("closest_recipe", std::string("-")),
                     w.value("worst_channel", json()).is_null() ? std::string("-") : std::to_string(w["worst_channel"].get<std::int64_t>()));
}

// A layer's output cells: the ratios to the deterministic and probabilistic bounds, and the
// channel statistic's worst channel (rho and its estimated threshold, in ppm).
std::string output_cells(const json& o) {
  if (o.is_null() || o.contains("not_checked") || o.contains("left_out"))
    return fmt::format("{:>8} {:>8} {:>9} {:>9} {:>9} {:>6}", "-", "-", "-", "-", "-", "-");
  const json& ch = o["channels"];
  std::string rho = "-", est = "-", bound = "-", chan = "-";  // none for Winograd or unfolded layers (not_computed)
  if (ch.contains("worst")) {
    rho = fmt::format("{:+.3g}", ch["worst"]["rho_ppm"].get<double>());
    est = fmt::format("{:.3g}", ch["worst"]["estimated_threshold_ppm"].get<double>());
    bound = fmt::format("{:.3g}", ch["worst"]["threshold_ppm"].get<double>());
    chan = std::to_string(ch["worst"]["channel"].get<std::int64_t>());
  }
  return fmt::format("{:>8} {:>8} {:>9} {:>9} {:>9} {:>6}", num(o["worst_ratio"]), num(o["probabilistic_worst_ratio"]), rho,
                     est, bound, chan);
}

std::string engine_block(const json& e) {
  std::string s = fmt::format("{} — {}  {}  ({:.1f} s)\n", e["label"].get<std::string>(),
                              e["engine"].get<std::string>().empty() ? "?" : e["engine"].get<std::string>(),
                              e["verdict"].get<std::string>(), e["seconds"].get<double>());
  if (!e["failed"].is_null()) return s + "  not checked: " + e["failed"].get<std::string>() + "\n\n";
  for (const json& n : e["notes"]) s += "  note: " + n.get<std::string>() + "\n";
  if (e["fusion_preserved"] == false) s += "  the adapter reports that its per-layer run did not reproduce the fused run's outputs: layer outputs not judged\n";
  for (const json& f : e["final_outputs"])
    s += fmt::format("  final output '{}': {} (worst ratio {} to the end-to-end bound, {} runs)\n", f["name"].get<std::string>(),
                     f["verdict"].get<std::string>(), num(f["worst_ratio"]), f["samples"].get<std::size_t>());
  if (!e["final_not_checked"].is_null()) s += "  final outputs not judged: " + e["final_not_checked"].get<std::string>() + "\n";
  s += fmt::format("  first layer beyond its bound or estimate: weights {}, outputs {}\n",
                   e["first_weights_beyond"].is_null() ? "none" : e["first_weights_beyond"].get<std::string>(),
                   e["first_outputs_beyond"].is_null() ? "none" : e["first_outputs_beyond"].get<std::string>());
  s += fmt::format("  {:<28} {:<11} {:>8} {:<13} {:>6} {:>8} {:>8} {:>9} {:>9} {:>9} {:>6}\n", "layer", "verdict", "w ratio",
                   "recipe", "w chan", "ratio", "prob", "rho ppm", "est ppm", "bound ppm", "chan");
  std::string last_note;  // a reason shared by consecutive layers is said once
  for (const json& l : e["layers"]) {
    s += fmt::format("  {:<28} {:<11} {} {}\n", shorten(l["name"].get<std::string>(), 28), l["verdict"].get<std::string>(),
                     weight_cells(l["weights"]), output_cells(l["outputs"]));
    std::string note;
    if (l["outputs"].is_object() && l["outputs"].contains("not_checked")) note = "outputs not checked: " + l["outputs"]["not_checked"].get<std::string>();
    if (l["outputs"].is_object() && l["outputs"].contains("left_out")) note = "left out by the engine: " + l["outputs"]["left_out"].get<std::string>();
    if (l["outputs"].is_object() && l["outputs"].contains("channels") && l["outputs"]["channels"].contains("not_computed"))
      note = "channel statistic not computed: " + l["outputs"]["channels"]["not_computed"].get<std::string>();
    if (!l["input_mismatch"].is_null()) note = "input: " + l["input_mismatch"].get<std::string>();
    if (!note.empty() && note != last_note) s += "      " + note + "\n";
    else if (!note.empty()) s += "      (the same)\n";
    last_note = note;
  }
  return s + "\n";
}

}  // namespace

std::string engines_text(const json& r) {
  const json& m = r["model"];
  std::string s = fmt::format("foldcheck engines {} — {} layer -> BatchNormalization pair(s)\n", m["path"].get<std::string>(),
                              m["pairs"].get<std::size_t>());
  s += "  w ratio: the folded weights' worst distance to the exact fold / the bound of the recipe they come closest to "
       "(recipe; w chan: the worst channel when beyond). ratio, prob: each conv's output on the engine's own input against "
       "the certified original layer, worst distance / the deterministic and the probabilistic bound. rho: the worst "
       "channel's (chan) estimated common relative change; est: what honest kernels reach on this input (estimated); "
       "bound: what any correct computation reaches (false alarm <= " +
       fmt::format("{:.2g}", r["channel_statistic"]["false_alarm_per_channel"].get<double>()) +
       " per channel). w ratio or ratio > 1, |rho| > bound: UNEXPECTED; |rho| > est only: SUSPICIOUS.\n\n";
  for (const json& e : r["engines"]) s += engine_block(e);
  s += "verdict: " + r["verdict"].get<std::string>() + seconds_suffix(r) + "\n";
  return s;
}

}  // namespace foldcheck::reports
