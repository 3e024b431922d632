"""Arrays into the C++ core: numpy arrays as they are, anything else made one.

The core reads float16, bfloat16 (ml_dtypes), float32 and float64 arrays in place through the
buffer protocol; a C-contiguous numpy array of those dtypes is passed without a copy. A torch
tensor is detached and moved to the CPU (its numpy view, no copy for a CPU tensor); a torch
bfloat16 tensor becomes an ml_dtypes.bfloat16 view of its bits. Lists and scalars become
float64 arrays only when no dtype is implied (the core then asks that values be values of the
dtype being checked).
"""
import os
import tempfile
from types import TracebackType
from typing import Any, TypeAlias, TypeGuard, overload

import numpy as np
import numpy.typing as npt

_FLOATS = {"float16", "bfloat16", "float32", "float64"}

# What the functions take as values: a numpy array, a torch tensor, a list or a number.
ArrayIn: TypeAlias = npt.ArrayLike
# What they take as a file: a path.
PathIn: TypeAlias = str | os.PathLike[str]


def _torch_tensor(x: object) -> TypeGuard[Any]:  # a torch.Tensor, torch imported or not
    mod = type(x).__module__
    return mod.startswith("torch") and hasattr(x, "detach") and hasattr(x, "dtype")


def numpy_dtype(name: str) -> np.dtype[Any]:
    """numpy's dtype for foldcheck's dtype name ("bfloat16" through ml_dtypes)."""
    if name == "bfloat16":
        import ml_dtypes  # noqa: PLC0415

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


@overload
def as_array(x: None, name: str, dtype: npt.DTypeLike | None = None, list_dtype: str | None = None) -> None: ...
@overload
def as_array(x: ArrayIn, name: str, dtype: npt.DTypeLike | None = None,
             list_dtype: str | None = None) -> npt.NDArray[Any]: ...
def as_array(x: ArrayIn | None, name: str, dtype: npt.DTypeLike | None = None,
             list_dtype: str | None = None) -> npt.NDArray[Any] | None:
    """x as a C-contiguous numpy array the core reads (`name` for messages). Values typed by
    nobody (a list, a Python number) are converted to `list_dtype` (rounded to it, as the
    command line rounds values typed as text), else to float64."""
    if x is None:
        return None
    if list_dtype is not None and isinstance(x, (list, tuple, float, int)):
        try:
            values = np.asarray(x, dtype=np.float64)
        except (TypeError, ValueError):  # ragged, or not numbers: numpy's own words name no argument
            raise TypeError(f"{name}: a {type(x).__name__} that is not an array of numbers") from None
        return np.ascontiguousarray(values.astype(numpy_dtype(list_dtype)))
    if _torch_tensor(x):
        x = _tensor_values(x, name)
    a = np.asarray(x) if dtype is None else np.asarray(x, dtype=dtype)
    if a.dtype.byteorder not in ("=", "|"):  # the core reads native byte order in place
        a = a.astype(a.dtype.newbyteorder("="))
    if a.dtype.kind not in "fiuV" and str(a.dtype) not in _FLOATS:
        raise TypeError(f"{name}: expected an array of numbers, got dtype {a.dtype}")
    if a.dtype.kind in "iu" and dtype is None:
        a = a.astype(np.float64)
    return np.ascontiguousarray(a)


def _tensor_values(x: Any, name: str) -> npt.NDArray[Any]:
    """A torch tensor's values as numpy (a CPU tensor's own memory where it can be): a bfloat16
    tensor as ml_dtypes.bfloat16 bits, a sparse one made dense (its values exactly, zeros where
    none is stored). Refused by name, saying what it is: a nested tensor (not one array), a
    quantized one, one on the meta device (no values), one of a dtype numpy has not (float8:
    foldcheck bounds float16, bfloat16, float32 and float64 arithmetic, not float8's)."""
    import torch  # noqa: PLC0415 (x is a torch tensor: torch is imported)

    t = x.detach()
    what = f"{name}: a {str(t.dtype).removeprefix('torch.')} tensor"
    if t.is_nested:
        raise TypeError(f"{name}: a nested tensor (torch.nested), not one array: pass each of its tensors")
    if t.is_quantized or t.is_meta:
        raise TypeError(f"{what} {'with quantized values' if t.is_quantized else 'on the meta device (no values)'}: "
                        "expected one of float16, bfloat16, float32 or float64 values")
    if t.layout is not torch.strided:
        t = t.to_dense()  # sparse (COO, CSR, CSC, BSR, BSC): its values exactly
    t = t.cpu().resolve_conj().resolve_neg().contiguous()
    if t.dtype == torch.bfloat16:
        import ml_dtypes  # noqa: PLC0415 (only for bfloat16 tensors)

        return np.ascontiguousarray(t.view(torch.int16).numpy().view(ml_dtypes.bfloat16))
    if t.dtype.is_floating_point and t.dtype not in (torch.float16, torch.float32, torch.float64):
        raise TypeError(f"{what}: foldcheck reads float16, bfloat16, float32 and float64 values and bounds their "
                        "arithmetic (a float8 value held as float16 would be checked with float16's bounds)")
    try:
        return t.numpy()
    except (TypeError, RuntimeError):  # a dtype numpy has not (uint16-64 on older numpy)
        raise TypeError(f"{what}, which numpy cannot hold: expected an array of numbers") from None


@overload
def scalar(x: None, name: str) -> None: ...
@overload
def scalar(x: ArrayIn, name: str) -> float: ...
def scalar(x: ArrayIn | None, name: str) -> float | None:
    """A Python float from a number, a 0-d/1-element array or tensor; None stays None."""
    if x is None:
        return None
    a = as_array(x, name)
    if a.size != 1:
        raise ValueError(f"{name}: expected one value, got {a.size}")
    return float(a.reshape(-1)[0].astype(np.float64))


class NpyFiles:
    """Arrays the core reads from files (models' inputs, observed outputs): each written to a
    private temporary directory as .npy, removed when the block ends. A path is passed on."""

    def __init__(self) -> None:
        self._dir: tempfile.TemporaryDirectory[str] | None = None

    def __enter__(self) -> "NpyFiles":
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        if self._dir is not None:
            self._dir.cleanup()

    def path(self, x: ArrayIn | PathIn | None, name: str) -> str | None:
        if x is None or isinstance(x, (str, os.PathLike)):
            return None if x is None else os.fspath(x)
        if self._dir is None:
            self._dir = tempfile.TemporaryDirectory(prefix="foldcheck-")
        p = os.path.join(self._dir.name, name + ".npy")
        np.save(p, as_array(x, name))
        return p
