// foldcheck._core's verdicts and their judgement (result/judgement.hpp), bound so that the Python
// layer names and combines verdicts exactly as the C++ commands do, never by a rule of its own.
//
//   Verdict                 an enum.StrEnum made here from the C++ enum, in its order
//                           (EXPECTED, SUSPICIOUS, UNEXPECTED, MISTRUSTED): a member equals its
//                           schema spelling, so r.verdict == "EXPECTED" holds and json.dumps
//                           writes the schema's text
//   worst(v, ...)           judgement's worst of one or more verdicts
//   tally(judged, also=())  a node of parts (judgement::Tally): MISTRUSTED when nothing was judged
//   of_check(failed, suspicious=False, informative=True)   one check's verdict
//   of_layer(fold=None, outputs=None, *, doubt=False, input_mismatch=False, not_the_layer=False,
//            unmodelled=None)  a layer's, from its facts (judgement::LayerFacts; unmodelled:
//                           None, "possibly" or "surely"); of_layer() is a layer that judged nothing
//   counts_against(v)       SUSPICIOUS or UNEXPECTED: evidence against a pass
// A verdict argument is a Verdict member or its spelling; anything else raises ValueError.
#include <optional>
#include <string>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "bind.hpp"
#include "foldcheck/result/judgement.hpp"

namespace foldcheck::py {
namespace pyb = pybind11;

namespace {

constexpr Verdict kAll[] = {Verdict::Expected, Verdict::Suspicious, Verdict::Unexpected, Verdict::Mistrusted};

Verdict verdict_of(const pyb::handle& v) {
  const std::string text = pyb::str(v);
  if (const std::optional<Verdict> r = verdict_named(text)) return *r;
  throw pyb::value_error("not a verdict: " + pyb::repr(v).cast<std::string>() +
                         " (EXPECTED, SUSPICIOUS, UNEXPECTED or MISTRUSTED)");
}

judgement::Unmodelled unmodelled_of(const std::optional<std::string>& u) {
  if (!u) return judgement::Unmodelled::No;
  if (*u == "possibly") return judgement::Unmodelled::Possibly;
  if (*u == "surely") return judgement::Unmodelled::Surely;
  throw pyb::value_error("unmodelled: " + *u + " (None, 'possibly' or 'surely')");
}

}  // namespace

pyb::object verdict_object(Verdict v) { return pyb::module_::import("foldcheck._core").attr("Verdict")(name(v)); }

void bind_judgement(pyb::module_& m) {
  pyb::list members;
  for (const Verdict v : kAll) members.append(pyb::make_tuple(name(v), name(v)));
  pyb::object cls = pyb::module_::import("enum").attr("StrEnum")("Verdict", members, pyb::arg("module") = "foldcheck");
  cls.attr("__doc__") = "A verdict, in order from best to worst (foldcheck/result/verdict.hpp); equal to its spelling.";
  cls.attr("__qualname__") = "Verdict";
  m.attr("Verdict") = cls;
  m.def(
      "worst",
      [](const pyb::args& verdicts) {
        if (verdicts.empty()) throw pyb::type_error("worst() takes at least one verdict");
        Verdict w = Verdict::Expected;
        for (const pyb::handle& v : verdicts) w = worst(w, verdict_of(v));
        return verdict_object(w);
      },
      "The worst of the verdicts (EXPECTED < SUSPICIOUS < UNEXPECTED < MISTRUSTED).");
  m.def(
      "tally",
      [](const pyb::iterable& judged, const pyb::iterable& also) {
        judgement::Tally t;
        for (const pyb::handle& v : judged) t.add(verdict_of(v));
        for (const pyb::handle& v : also) t.also(verdict_of(v));
        return verdict_object(t.verdict());
      },
      pyb::arg("judged"), pyb::arg("also") = pyb::tuple(),
      "A node of parts: the worst of `judged` and `also`; MISTRUSTED when `judged` is empty.");
  m.def(
      "of_check",
      [](bool failed, bool suspicious, bool informative) {
        return verdict_object(
            judgement::of_check({.failed = failed, .suspicious = suspicious, .informative = informative}));
      },
      pyb::arg("failed"), pyb::arg("suspicious") = false, pyb::arg("informative") = true,
      "One check's verdict: UNEXPECTED if failed, SUSPICIOUS if suspicious, MISTRUSTED if nothing was informative.");
  m.def(
      "of_layer",
      [](const pyb::handle& fold, const pyb::handle& outputs, bool doubt, bool input_mismatch, bool not_the_layer,
         const std::optional<std::string>& unmodelled) {
        judgement::LayerFacts f;
        if (!fold.is_none()) f.fold = verdict_of(fold);
        if (!outputs.is_none()) f.outputs = verdict_of(outputs);
        f.doubt = doubt;
        f.input_mismatch = input_mismatch;
        f.not_the_layer = not_the_layer;
        f.unmodelled = unmodelled_of(unmodelled);
        return verdict_object(judgement::of_layer(f));
      },
      pyb::arg("fold") = pyb::none(), pyb::arg("outputs") = pyb::none(), pyb::kw_only(), pyb::arg("doubt") = false,
      pyb::arg("input_mismatch") = false, pyb::arg("not_the_layer") = false, pyb::arg("unmodelled") = pyb::none(),
      "A layer's verdict from its facts (result/judgement.hpp LayerFacts): another input or computation is "
      "UNEXPECTED; surely folded with an op foldcheck does not model, MISTRUSTED; a fold beyond its bound, "
      "UNEXPECTED; else the worst judged (MISTRUSTED when nothing was), MISTRUSTED if possibly folded with such an "
      "op and it counts against the layer.");
  m.def(
      "counts_against", [](const pyb::handle& v) { return judgement::counts_against(verdict_of(v)); },
      "Whether the verdict is evidence against a pass (SUSPICIOUS or UNEXPECTED).");
}

}  // namespace foldcheck::py
