// The one judgement module (judgement.hpp): the policies, each as its header states it.
#include "foldcheck/result/judgement.hpp"

namespace foldcheck {

namespace {
// The one order of verdicts, best to worst: EXPECTED, SUSPICIOUS, MISTRUSTED, UNEXPECTED.
int rank(Verdict v) {
  switch (v) {
    case Verdict::Expected: return 0;
    case Verdict::Suspicious: return 1;
    case Verdict::Mistrusted: return 2;
    case Verdict::Unexpected: return 3;
  }
  return 3;
}
}  // namespace

Verdict worst(Verdict a, Verdict b) { return rank(a) >= rank(b) ? a : b; }

namespace judgement {

Verdict of_check(const CheckFacts& f) {
  if (f.failed) return Verdict::Unexpected;
  if (f.suspicious) return Verdict::Suspicious;
  return f.informative ? Verdict::Expected : Verdict::Mistrusted;
}

Verdict unless_uninformative(Verdict v, bool informative) {
  return v == Verdict::Expected && !informative ? Verdict::Mistrusted : v;
}

Verdict deterministic_only(Verdict elements) { return elements == Verdict::Suspicious ? Verdict::Expected : elements; }

Verdict of_channels(std::int64_t beyond, std::int64_t suspicious) {
  return beyond > 0 ? Verdict::Unexpected : suspicious > 0 ? Verdict::Suspicious : Verdict::Expected;
}

Verdict of_layer(const LayerFacts& f) {
  if (f.input_mismatch || f.not_the_layer) return Verdict::Unexpected;
  if (f.unmodelled == Unmodelled::Surely) return Verdict::Mistrusted;
  Verdict v = Verdict::Unexpected;
  if (f.fold != Verdict::Unexpected) {
    Tally t;
    if (f.doubt) t.also(Verdict::Mistrusted);
    if (f.fold) t.add(*f.fold);
    if (f.outputs) t.add(*f.outputs);
    v = t.verdict();
  }
  return f.unmodelled == Unmodelled::Possibly && counts_against(v) ? Verdict::Mistrusted : v;
}

Verdict of_layer(Verdict fold, std::optional<Verdict> outputs) { return of_layer(LayerFacts{fold, outputs}); }

Verdict of_end_to_end(Verdict layers, bool own_runs_failed, bool compared_nothing) {
  const Verdict v = own_runs_failed ? Verdict::Unexpected : layers;
  return compared_nothing ? worst(v, Verdict::Mistrusted) : v;
}

Verdict of_observed_weights(Verdict explained) {
  return explained == Verdict::Expected ? Verdict::Expected : Verdict::Unexpected;
}

Verdict unless_vacuous(Verdict part) { return part == Verdict::Mistrusted ? Verdict::Expected : part; }

bool counts_against(Verdict v) { return v == Verdict::Suspicious || v == Verdict::Unexpected; }

bool is_regression(std::optional<Verdict> baseline, std::optional<Verdict> current) {
  return (current ? rank(*current) : -1) > (baseline ? rank(*baseline) : -1);
}

Verdict of_expectation(Verdict got, Verdict expected) {
  if (got == expected) return Verdict::Expected;
  return got == Verdict::Mistrusted ? Verdict::Mistrusted : Verdict::Unexpected;
}

void Tally::add(Verdict v) {
  worst_ = worst(worst_, v);
  judged_ = true;
}

void Tally::also(Verdict v) { worst_ = worst(worst_, v); }

Verdict Tally::verdict() const { return judged_ ? worst_ : Verdict::Mistrusted; }

}  // namespace judgement
}  // namespace foldcheck
