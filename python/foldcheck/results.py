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
    r.report()       the text report ("json", "markdown", "html" also)
    r.arrays         {name: numpy view} of per-element data (explain: residual_ulp, ...)
"""
import json
from typing import Any

import numpy as np
import numpy.typing as npt

from ._core import Verdict

VERDICTS = tuple(Verdict)  # in the C++ enum's order, best to worst


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
        return self._core.report(format)

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
        return f"<{type(self).__name__} {self.verdict}{self._repr_extra()}>"

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
            if layer["verdict"] != "EXPECTED":
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

    def _repr_extra(self) -> str:
        return f" culprit: {self.culprit}" if self.culprit else ""
