"""The typed results of foldcheck's functions.

Each wraps the C++ core's result: the verdict its C++ type computed (never read back from the
JSON), the versioned JSON of the `foldcheck` command (schema reports/schema/foldcheck.schema.json,
the same bytes `foldcheck CMD --format json --no-timing` writes, timing aside), the command's
text report, and per-element data as read-only numpy views of the core's memory.

    r.verdict        a foldcheck.Verdict (EXPECTED, SUSPICIOUS, UNEXPECTED or MISTRUSTED; a str enum
                     equal to its spelling) made by the C++ core, as every verdict in this package
    r.passed         r.verdict == Verdict.EXPECTED (nothing compared is never a pass: MISTRUSTED)
    r.exit_code      what the `foldcheck` command would exit with (0 or 1)
    r.to_json()      the JSON text; r.to_dict() the parsed dict; r["key"] one of its fields
    r.report()       the text report, answer first: the verdict and its reason, then the
                     command's report by the core's renderer, long per-element listings capped
                     ("json", "markdown", "html" also: the core's, whole)
    r.reason         the sentence that gives the verdict's reason (None when the result has none)
    r.arrays         {name: numpy view} of per-element data (explain: residual_ulp, ...)
"""
import json
from collections.abc import Iterable
from typing import Any

import numpy as np
import numpy.typing as npt

from . import _core
from ._core import Verdict

VERDICTS = tuple(Verdict)  # the C++ enum's order (worst() ranks MISTRUSTED below UNEXPECTED)
SHOWN = 24  # rows of a per-element (or per-layer) listing a text report shows; the rest are counted


class Result:
    """One command's result (see the module's documentation)."""

    def __init__(self, core: Any) -> None:  # core: a foldcheck._core.Result
        self._core = core
        self._dict: dict[str, Any] | None = None

    @property
    def command(self) -> str:
        return self._core.command

    @property
    def verdict(self) -> Verdict:
        return self._core.verdict

    @property
    def passed(self) -> bool:
        return self.verdict == Verdict.EXPECTED

    @property
    def exit_code(self) -> int:
        return self._core.exit_code

    def to_json(self, indent: int | None = None) -> str:
        return self._core.to_json(-1 if indent is None else int(indent))

    def to_dict(self) -> dict[str, Any]:
        if self._dict is None:
            self._dict = json.loads(self._core.to_json(-1))
        return self._dict

    def __getitem__(self, key: str) -> Any:
        return self.to_dict()[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.to_dict().get(key, default)

    def report(self, format: str = "text") -> str:  # noqa: A002 (the CLI's word)
        """The report: text is answer first (answer(), then details()); json, markdown and html
        are the core's."""
        if format != "text":
            return self._core.report(format)
        return "\n\n".join(part for part in (self.answer(), self.details()) if part)

    def answer(self) -> str:
        """The verdict and the sentence that gives its reason: the first line of every report
        (the core's answer renderer for run and accuracy-diff, reports/run_answer.hpp)."""
        core = self._core.answer() if self._core is not None else ""
        # The reason quotes the JSON, whose names are exact: shown as the core's reports show them.
        return core or _core.neutralised(f"verdict: {self.verdict}" + (f": {self.reason}" if self.reason else ""))

    @property
    def reason(self) -> str | None:
        """The result's first reasoning sentence, or its summary, when its command writes one."""
        r = self.reasoning
        summary = self.get("summary")
        return r[0] if r else summary if isinstance(summary, str) else None

    def details(self) -> str:
        """What the text report shows after the answer: the command's text report (the core's
        renderer)."""
        return self._core.report("text")

    @property
    def arrays(self) -> dict[str, npt.NDArray[np.generic]]:
        return {n: self._core.array(n) for n in self._core.array_names()}

    @property
    def reasoning(self) -> list[str]:
        """The result's reasoning sentences, when its command writes them."""
        r = self.get("reasoning")
        return [r] if isinstance(r, str) else list(r or [])

    def __str__(self) -> str:
        return self.report("text")

    def __repr__(self) -> str:
        return _core.neutralised(f"<{type(self).__name__} {self.verdict}{self._repr_extra()}>")

    def _repr_extra(self) -> str:
        return ""


class ExplainResult(Result):
    """`explain`: is an observed folded weight tensor the fold of a BatchNorm?"""

    @property
    def bit_exact_recipes(self) -> list[str]:
        """The engine recipes whose replay reproduces every observed value bit for bit."""
        return list(self.get("bit_exact_recipes") or [])

    @property
    def recipes(self) -> list[dict[str, Any]]:
        return list(self["recipes"])

    @property
    def residual_ulp(self) -> npt.NDArray[np.float64]:
        """(observed - exact fold) / ulp, per element, signed and fractional (the input's shape)."""
        return self._core.array("residual_ulp")

    @property
    def bound_ulp(self) -> npt.NDArray[np.float64]:
        """The cited recipe's a-priori bound per element, in ULP of the exact fold."""
        return self._core.array("bound_ulp")

    @property
    def exact(self) -> npt.NDArray[np.float64]:
        """The certified exact fold w*gamma/sqrt(var+eps), per element (to double)."""
        return self._core.array("exact")

    def details(self) -> str:
        """explain's text report with its element table capped to SHOWN rows."""
        return capped(self._core.report("text"), "index ", "rows")

    def _repr_extra(self) -> str:
        b = self.bit_exact_recipes
        return f" bit-exact: {', '.join(b)}" if b else ""


class DiagnoseResult(Result):
    """`diagnose`: is an observed output the layer's, and if not, which bug explains it?"""

    @property
    def best(self) -> str | None:
        """The hypothesis that explains an output the layer as given does not (or None)."""
        return self.get("best")

    @property
    def fix(self) -> str | None:
        return self.get("fix")

    @property
    def hypotheses(self) -> list[dict[str, Any]]:
        return list(self.get("hypotheses") or [])

    @property
    def summary(self) -> str:
        """The verdict's reason in one sentence."""
        return str(self.get("summary") or "")

    @property
    def arithmetic(self) -> str:
        """The arithmetic the layer was judged in ("float32", "tf32", ...)."""
        return str((self.get("arithmetic") or {}).get("name", "float32"))

    @property
    def replay(self) -> str | None:
        """Under an arithmetic other than float32: the replay of the converted operands the
        verdict used (e.g. "tf32 nearest-away"), else None."""
        return (self.get("arithmetic") or {}).get("replay")

    @property
    def band(self) -> dict[str, Any]:
        """The calibrated band beside the bound: per output channel, the common relative change
        of its outputs (rho) against what honest computations of the layer reach ("computed",
        "beyond" (channels, worst first), "worst", "band_ppm"; "not_computed": why none)."""
        return dict(self.get("band") or {})

    def _repr_extra(self) -> str:
        return f" best: {self.best}" if self.best else ""


class FoldCheckResult(Result):
    """A fused layer's weight and bias against the exact fold, each recipe's bound."""

    @property
    def closest_recipe(self) -> str | None:
        return self.get("closest_recipe")

    @property
    def worst_channel(self) -> int | None:
        return self.get("worst_channel")

    @property
    def worst_ratio(self) -> float | None:
        return self.get("worst_ratio")


class AccuracyDiffResult(Result):
    """`accuracy-diff`: every Conv -> BatchNormalization pair of a model (and an observed fold)."""

    @property
    def layers(self) -> list[dict[str, Any]]:
        return list(self["layers"])

    @property
    def first_unexpected_layer(self) -> str | None:
        for layer in self.layers:
            if Verdict(layer["verdict"]) is not Verdict.EXPECTED:
                return layer["name"]
        return None

    def _repr_extra(self) -> str:
        return f" layers: {len(self.layers)}"


class EnginesResult(Result):
    """`engines`: real engines run on a model, what they produced checked."""

    @property
    def runs(self) -> list[dict[str, Any]]:
        return list(self.get("engines") or self.get("runs") or [])


class RunResult(Result):
    """`run`: a case file's layer in every dtype, fused and unfused, against the reference."""


class QuantCheckResult(Result):
    """`quant-check`: dumped integers against the quantized exact fold."""


class BisectResult(Result):
    """`bisect`: the pass that takes a drift past what rounding explains (exit_code 1 when one is named)."""

    @property
    def culprit(self) -> str | None:
        return self.get("culprit")

    @property
    def reason(self) -> str | None:
        c = self.culprit
        return f"the culprit is {c}" if c else super().reason

    def _repr_extra(self) -> str:
        return f" culprit: {self.culprit}" if self.culprit else ""


def lines_for_people(lines: Iterable[str]) -> str:
    """Lines of a text report or message built in Python, joined: each neutralised as one line
    (_core.neutralised, the core's rule for names in every report made for people: a module or
    layer name holding ESC, CR, a line break or a bidi control is shown as \\u001B, \\r, \\n,
    \\u202E and cannot drive a terminal or forge a line). Each element is one line: a name in it
    is escaped whole."""
    return "\n".join(_core.neutralised(line) for line in lines)


def capped(text: str, header: str, what: str, shown: int = SHOWN) -> str:
    """`text` with the rows of its table that starts with the line `header` (a per-element
    listing, up to the next blank line) cut to `shown`, and a line that says how many were left
    out and where they all are."""
    lines = text.split("\n")
    start = next((i for i, line in enumerate(lines) if line.startswith(header)), None)
    if start is None:
        return text
    end = next((i for i in range(start + 1, len(lines)) if not lines[i].strip()), len(lines))
    rows = end - start - 1
    if rows <= shown:
        return text
    note = f"  ... {rows - shown} more {what} not shown (report('json') and .arrays have every element)"
    return "\n".join(lines[:start + 1 + shown] + [note] + lines[end:])
